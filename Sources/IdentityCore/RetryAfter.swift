import Foundation

/// `Retry-After` (RFC 9110 §10.2.3): delta-seconds or an HTTP-date.
public enum RetryAfter {
    /// Seconds to wait, rounded up, never shortened (behaviour §5).
    /// - Parameters:
    ///   - value: the header value; lookups of the header must be case-insensitive (case 21).
    ///   - now: current time, for an HTTP-date.
    /// - Returns: whole seconds ≥ 0; nil when absent or invalid. A date in the past gives 0.
    public static func seconds(_ value: String?, now: Date) -> Int? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if value.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
            return Int(value) ?? Int.max  // too many digits: saturate rather than shorten
        }
        guard let date = httpDate(value) else { return nil }
        let delta = date.timeIntervalSince(now)
        return delta <= 0 ? 0 : Int(delta.rounded(.up))
    }

    /// Parses IMF-fixdate and the two obsolete forms (RFC 9110 §5.6.7).
    static func httpDate(_ text: String) -> Date? {
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }
}
