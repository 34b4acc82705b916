import Foundation
import TokenRelayBase

extension ConfigurationLoader {
    /// Reads `TOKENRELAY_CLIENT_SECRET_EXPIRES_AT`: an RFC 3339 date-time (RFC 3339 §5.6) with a
    /// `Z` or numeric offset and optional fractional seconds, e.g. `2027-03-31T00:00:00Z`.
    /// - Throws: `ConfigurationError` naming the setting when it is not such a date-time.
    package static func parseClientSecretExpiry(_ text: String) throws -> Date {
        if let date = RFC3339.parse(text.trimmingCharacters(in: .whitespaces).uppercased()) { return date }
        throw ConfigurationError(
            setting: "TOKENRELAY_CLIENT_SECRET_EXPIRES_AT", reason: "must be an RFC 3339 date-time with a time zone, e.g. 2027-03-31T00:00:00Z")
    }
}
