import Foundation

/// RFC 3339 date-times (`2026-12-05T02:00:00Z`, `2026-12-05T03:00:00.250+01:00`), as the API's
/// query parameters and the command line take them (RFC 3339 §5.6, with `T` and an offset).
package enum RFC3339 {
    /// The instant `text` names, or nil when it is not an RFC 3339 date-time with an offset.
    package static func parse(_ text: String) -> Date? {
        for options: ISO8601DateFormatter.Options in [[.withInternetDateTime], [.withInternetDateTime, .withFractionalSeconds]] {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = options
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }

    /// `date` in UTC with milliseconds (`2026-12-05T02:00:00.000Z`).
    package static func format(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }
}
