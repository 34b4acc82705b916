import IdentityCore
import TokenRelayBase

/// The rules for the members that look accounts up by name, `username` and `tenant_id`: one
/// reading for `GET /v1/accounts?username=&tenant_id=` and `POST /v1/tokens/silent`'s
/// `username` + `tenant_id`, and the tenant of `/v1/tokens/app` (behaviour §4.5: the same member is
/// held to the same rules on every route), so a `tenant_id` no account could have is a 400 naming
/// it, not a 404 naming `username`, and one no tenant could have is not sent to the platform.
package enum AccountLookupRules {
    /// The most bytes (UTF-8) of a name a lookup takes; the accounts list holds every query value to it.
    package static let maximumBytes = 512

    /// Text of at most ``maximumBytes`` bytes with no control character: a username, or any value
    /// of the accounts list's query.
    /// - Throws: `RelayError` 400 `invalid_request` naming `field`.
    package static func boundedText(_ text: String, field: String) throws(RelayError) -> String {
        guard text.utf8.count <= maximumBytes, !text.containsControlCharacter else {
            throw RelayError.invalidRequest(field: field, "'\(field)' must be at most \(maximumBytes) bytes without control characters.")
        }
        return text
    }

    /// A username to look accounts up by (``boundedText(_:field:)``).
    /// - Throws: `RelayError` 400 `invalid_request` naming `username`.
    package static func username(_ text: String) throws(RelayError) -> String {
        try boundedText(text, field: "username")
    }

    /// A tenant to narrow a lookup to: a tenant id or a domain name (``IdentityCore/TenantName/isTenant(_:)``).
    /// Any other text matches no account, and an empty answer (or a 404) would hide the mistake.
    /// - Throws: `RelayError` 400 `invalid_request` naming `tenant_id`.
    package static func tenantId(_ text: String) throws(RelayError) -> String {
        guard TenantName.isTenant(text) else {
            throw RelayError.invalidRequest(
                field: "tenant_id", "'tenant_id' must be a tenant id (a GUID such as 72f988bf-86f1-41af-91ab-2d7cd011db47) or a domain name.")
        }
        return text
    }
}
