import CryptoBridge
import TokenRelayBase
import TokenRelayStore

/// The opaque `cursor` of a paged list (behaviour §3.4): base64url of a kind prefix (`a:`
/// accounts, `t:` tenants, `e:` events, `au:` audit) and the last item's key. Shared by the
/// routes and the command line, so that every list refuses a cursor it did not issue in the same
/// way. The cursors of positions (events, audit) are signed: followed by the HMAC-SHA256 of the
/// text under a ``RingSigner`` (purpose `page-cursor`), so a position the service never handed out
/// is refused rather than read (a key-named cursor, `a:`/`t:`, only skips to a name).
package enum PageCursor {
    /// The signer of cursors: keys derived from the encryption key ring, the same on every replica.
    package static func signer(ring: @escaping @Sendable () -> KeyRing) -> RingSigner { RingSigner(ring: ring, purpose: "page-cursor") }

    package static func encode(_ key: String, prefix: String) -> String { Base64URL.encode(Array((prefix + key).utf8)) }

    /// `prefix` and `key`, then their HMAC-SHA256 under `signer`'s first key, as base64url.
    package static func encode(_ key: String, prefix: String, signer: RingSigner) -> String {
        let text = Array((prefix + key).utf8)
        return Base64URL.encode(text + signer.sign(text))
    }

    /// The key in `cursor`, or nil when it is not base64url (in the one spelling this service
    /// writes) of UTF-8 text with `prefix`, or holds a control character: a cursor this service
    /// issued holds an id, and a forged one with a NUL reached PostgreSQL and was answered naming
    /// the field `input`.
    package static func decode(_ cursor: String, prefix: String) -> String? {
        guard let bytes = Base64URL.decodeCanonical(cursor) else { return nil }
        return key(in: bytes, prefix: prefix)
    }

    /// The key in a cursor ``encode(_:prefix:signer:)`` wrote under any key of `signer`'s ring;
    /// nil for any other (an unsigned cursor of an earlier version too).
    package static func decode(_ cursor: String, prefix: String, signer: RingSigner) -> String? {
        guard let bytes = Base64URL.decodeCanonical(cursor), bytes.count > SHA256.byteCount else { return nil }
        let text = Array(bytes.dropLast(SHA256.byteCount))
        guard signer.verify(text, tag: Array(bytes.suffix(SHA256.byteCount))) else { return nil }
        return key(in: text, prefix: prefix)
    }

    /// A signed cursor of a position (an event's `seq`, an audit row's id).
    package static func encode(position: Int64, prefix: String, signer: RingSigner) -> String {
        encode(String(position), prefix: prefix, signer: signer)
    }

    /// The position in a cursor ``encode(position:prefix:signer:)`` wrote, in the one spelling it
    /// writes: a made-up position was read as one (behaviour Known gaps 9), and `e:01` and `e:+1`
    /// were taken and echoed back as `next_cursor`.
    package static func position(in cursor: String, prefix: String, signer: RingSigner) -> Int64? {
        guard let text = decode(cursor, prefix: prefix, signer: signer), let position = Int64(text), position >= 0, String(position) == text else {
            return nil
        }
        return position
    }

    private static func key(in bytes: [UInt8], prefix: String) -> String? {
        guard let text = String(bytes: bytes, encoding: .utf8), text.hasPrefix(prefix), !text.containsControlCharacter else { return nil }
        return String(text.dropFirst(prefix.count))
    }
}
