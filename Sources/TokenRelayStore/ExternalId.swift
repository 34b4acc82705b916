import IdentityCore
import TokenRelayBase

/// A caller-chosen account id and whose it is (behaviour §3.7, §12 Accounts): unique per owner,
/// accepted wherever an `account_id` is. The owner is an API key's `name` (`bootstrap` for the
/// bootstrap key), so every key of one name shares its external ids.
package struct ExternalId: Sendable, Equatable, Hashable {
    /// The key name (``RequestContext/owner``).
    package let owner: String
    /// 1–128 printable ASCII characters but `/`, no space at either end, never starting with `acc_`.
    package let value: String

    package init(owner: String, value: String) {
        self.owner = owner
        self.value = value
    }

    /// Longest external id, in characters (all ASCII, so also bytes).
    package static let maxLength = 128

    /// The member's value checked against the rules of behaviour §3.7.
    /// - Parameters:
    ///   - text: the value given (`external_id` of a sign-in or an import).
    ///   - owner: the caller's key name.
    /// - Throws: `RelayError` 400 `invalid_request` naming `field`: empty, longer than 128, a
    ///   character outside printable ASCII (0x20–0x7E), a `/` (the server decodes `%2F` in a
    ///   path, so `GET /v1/accounts/{account_id}` could never name it), a space at either end,
    ///   the shape of TokenRelay's own account ids (`acc_…`, any case), which would make a
    ///   value given as `account_id` ambiguous, or a value the account path cannot name
    ///   (``unreachableInPath``).
    package static func validated(_ text: String, owner: String, field: String = "external_id") throws(RelayError) -> ExternalId {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= maxLength, bytes.allSatisfy({ ($0 == 0x20 || $0.isASCIIVisible) && $0 != UInt8(ascii: "/") }),
            bytes.first != 0x20, bytes.last != 0x20
        else {
            throw RelayError.invalidRequest(
                field: field, "'\(field)' must be 1-\(maxLength) printable ASCII characters other than '/', without a space at either end.")
        }
        guard !looksLikeAccountId(text) else {
            throw RelayError.invalidRequest(field: field, "'\(field)' may not start with 'acc_', the prefix of TokenRelay's own account ids.")
        }
        guard !unreachableInPath.contains(text) else {
            throw RelayError.invalidRequest(field: field, "'\(field)' may not be '\(text)': '/v1/accounts/\(text)' names something else.")
        }
        return ExternalId(owner: owner, value: text)
    }

    /// Values `/v1/accounts/{account_id}` can never name: a route of its own (`import`), and the
    /// dot segments clients remove from a path (RFC 3986 §5.2.4).
    package static let unreachableInPath: Set<String> = ["import", ".", ".."]

    /// Whether `value` has the shape of TokenRelay's account ids (`acc_` and random base64url,
    /// `TokenStore.saveSignIn`, `importAccount`), which no external id may have: such a value
    /// given as `account_id` is only ever an account id or an import alias.
    package static func looksLikeAccountId(_ value: String) -> Bool {
        // Read on the cached token path for every `account_id` (behaviour §10): four bytes, no allocation.
        let utf8 = value.utf8
        let bytes = utf8.span
        guard bytes.count >= 4 else { return false }
        return bytes[0] | 0x20 == UInt8(ascii: "a") && bytes[1] | 0x20 == UInt8(ascii: "c") && bytes[2] | 0x20 == UInt8(ascii: "c")
            && bytes[3] == UInt8(ascii: "_")
    }

    /// 409 `conflict` naming `field`: another account of the owner holds the external id.
    package static func conflict(field: String = "external_id") -> RelayError {
        RelayError(
            .conflict, "Another account already has this 'external_id' for this API key's owner; choose another or delete that account first.",
            extensions: ["field": .string(field)])
    }
}

/// How ``TokenStore/assign(_:to:in:)`` ended.
package enum ExternalIdAssignment: Sendable, Equatable {
    /// The account now holds the external id (replacing its earlier one of the same owner).
    case assigned
    /// The account held it already.
    case unchanged
    /// Another account of the owner holds it; nothing changed.
    case heldByAnother
}
