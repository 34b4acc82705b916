/// The syntax `redirect_after` must have before a sign-in starts (behaviour §3; issue 10 item 13).
///
/// An absolute URI of RFC 3986 §4.3 (`scheme ":" hier-part [ "?" query ]`, plus an optional
/// `"#" fragment`, which the callback keeps after the added `account_id`) may hold only the
/// characters of §2: unreserved, reserved (gen-delims and sub-delims) and `%` followed by two
/// hex digits (§2.1). Anything else (control characters such as CR and LF that would split the
/// callback's `Location` header, space, `<`, `>`, `"`, `\`, `^`, `` ` ``, `{`, `|`, `}`, and
/// every raw non-ASCII character such as U+2028) is refused, never percent-encoded on the
/// caller's behalf. `URLComponents` then reads the parts: it is lenient about some of these.
enum RedirectAfter {
    /// At most this many bytes (browsers cap URLs near 8 KB; ours also goes into a header).
    static let maximumBytes = 2048

    /// Whether `text` is an absolute URI of RFC 3986 characters with well-formed escapes, at
    /// most one `#`, and a scheme of `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )` (§3.1).
    static func isWellFormed(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumBytes else { return false }
        var index = 0
        var fragments = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, isHexDigit(bytes[index + 1]), isHexDigit(bytes[index + 2]) else { return false }
                index += 3
                continue
            }
            guard allowed(byte) else { return false }
            if byte == UInt8(ascii: "#") { fragments += 1 }
            index += 1
        }
        guard fragments <= 1, let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0, isAlpha(bytes[0]) else { return false }
        return bytes[1..<colon].allSatisfy { isAlpha($0) || isDigit($0) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }
    }

    /// unreserved (§2.3), gen-delims and sub-delims (§2.2).
    private static func allowed(_ byte: UInt8) -> Bool {
        if isAlpha(byte) || isDigit(byte) { return true }
        return Array("-._~:/?#[]@!$&'()*+,;=".utf8).contains(byte)
    }

    private static func isAlpha(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        isDigit(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
    }
}
