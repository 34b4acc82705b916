import CryptoBridge
import TokenRelayBase

/// The opaque `cursor` of a paged list (behaviour §3.4): base64url of a kind prefix (`a:`
/// accounts, `t:` tenants, `e:` events) and the last item's key. Shared by the routes and the
/// command line, so that every list refuses a cursor it did not issue in the same way.
package enum PageCursor {
    package static func encode(_ key: String, prefix: String) -> String { Base64URL.encode(Array((prefix + key).utf8)) }

    /// The key in `cursor`, or nil when it is not base64url of UTF-8 text with `prefix`, or holds
    /// a control character: a cursor this service issued holds an id, and a forged one with a NUL
    /// reached PostgreSQL and was answered naming the field `input`.
    package static func decode(_ cursor: String, prefix: String) -> String? {
        guard let bytes = Base64URL.decode(cursor), let text = String(bytes: bytes, encoding: .utf8), text.hasPrefix(prefix),
            !text.containsControlCharacter
        else { return nil }
        return String(text.dropFirst(prefix.count))
    }
}
