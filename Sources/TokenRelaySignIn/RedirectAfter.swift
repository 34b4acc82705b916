import IdentityCore
import TokenRelayBase

/// The syntax `redirect_after` must have before a sign-in starts (behaviour §3; issue 10 item 13).
///
/// An absolute URI of RFC 3986 §4.3 (`scheme ":" hier-part [ "?" query ]`, plus an optional
/// `"#" fragment`, which the callback keeps after the added `account_id`) may hold only the
/// characters of §2: unreserved, reserved (gen-delims and sub-delims) and `%` followed by two
/// hex digits (§2.1). Anything else (control characters such as CR and LF that would split the
/// callback's `Location` header, space, `<`, `>`, `"`, `\`, `^`, `` ` ``, `{`, `|`, `}`, and
/// every raw non-ASCII character such as U+2028) is refused, never percent-encoded on the
/// caller's behalf. `URLComponents` then reads the parts: it is lenient about some of these.
package enum RedirectAfter {
    /// At most this many bytes (browsers cap URLs near 8 KB; ours also goes into a header).
    package static let maximumBytes = 2048

    /// Whether `text` is an absolute URI of RFC 3986 characters with well-formed escapes, at
    /// most one `#`, and a scheme of `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )` (§3.1).
    package static func isWellFormed(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumBytes else { return false }
        var index = 0
        var fragments = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, bytes[index + 1].isASCIIHexDigit, bytes[index + 2].isASCIIHexDigit else { return false }
                index += 3
                continue
            }
            guard allowed(byte) else { return false }
            if byte == UInt8(ascii: "#") { fragments += 1 }
            index += 1
        }
        guard fragments <= 1, let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0, bytes[0].isASCIILetter else { return false }
        return bytes[1..<colon].allSatisfy { $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }
    }

    /// unreserved (§2.3), gen-delims and sub-delims (§2.2).
    private static func allowed(_ byte: UInt8) -> Bool {
        if byte.isASCIIAlphanumeric { return true }
        return Array("-._~:/?#[]@!$&'()*+,;=".utf8).contains(byte)
    }

}
