import Foundation

/// Lenient base64 / base64url codec (RFC 4648 §4 and §5).
///
/// The identity platform sends `client_info`, JWT segments and `claims` as base64url, usually
/// without `=` padding, sometimes as standard base64 with padding (behaviour §5 "parsed leniently").
enum Base64URL {
    /// Decodes base64url or standard base64, with or without padding.
    /// - Returns: the bytes, or nil when the text is not base64.
    static func decode(_ text: String) -> [UInt8]? {
        decode(Array(text.utf8)[...])
    }

    /// ``decode(_:)`` of UTF-8 text (a JWT's segment, say).
    static func decode(_ utf8: ArraySlice<UInt8>) -> [UInt8]? {
        // Text that starts or ends with a non-ASCII byte may have Unicode white space around: Foundation's, as before.
        guard let first = utf8.first, let last = utf8.last, first < 0x80, last < 0x80 else {
            return decodeThroughFoundation(String(decoding: utf8, as: UTF8.self))
        }
        // The text made standard base64 on its bytes, then decoded by Foundation: every refresh
        // reads the access token's payload for its `uti`, and the `String` trimming and
        // replacements were most of the 4% of a forced refresh's CPU this decoding took (issue
        // 30). The same leniency: white space around, either alphabet, padding or none. On an
        // array's bytes: walking a `String`'s UTF-8 view cost several times more.
        var symbols = utf8.drop { isASCIIWhiteSpace($0) }
        while let end = symbols.last, isASCIIWhiteSpace(end) { symbols = symbols.dropLast() }
        while symbols.last == UInt8(ascii: "=") { symbols = symbols.dropLast() }
        // `=` inside: `Data(base64Encoded:)` has its own reading of some (`QQ=A` is 41 00); kept.
        if symbols.contains(UInt8(ascii: "=")) { return decodeThroughFoundation(String(decoding: utf8, as: UTF8.self)) }
        guard symbols.count % 4 != 1 else { return nil }
        // Made standard here, decoded by Foundation: a decoder of our own (37k instead of about
        // 90k of a forced refresh's instructions, behaviour §10) would be a second beside
        // CryptoBridge's, and base64 is a well-kept library's job, not ours.
        // Copied whole, then the few URL-alphabet symbols replaced in place: an `append` per byte
        // cost about 15 instructions a byte (behaviour §10).
        var standard: [UInt8] = []
        standard.reserveCapacity(symbols.count + 3)
        standard.append(contentsOf: symbols)
        for index in standard.indices {
            switch standard[index] {
            case UInt8(ascii: "-"): standard[index] = UInt8(ascii: "+")
            case UInt8(ascii: "_"): standard[index] = UInt8(ascii: "/")
            default: break
            }
        }
        if symbols.count % 4 != 0 { standard.append(contentsOf: repeatElement(UInt8(ascii: "="), count: 4 - symbols.count % 4)) }
        return Data(base64Encoded: Data(standard)).map { [UInt8]($0) }
    }

    /// What `CharacterSet.whitespacesAndNewlines` holds of ASCII: tab, line feed, vertical tab,
    /// form feed, carriage return, space.
    private static func isASCIIWhiteSpace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || (0x09...0x0D).contains(byte)
    }

    /// ``decode(_:)`` through Foundation, as it was before issue 30: for text that starts or ends
    /// with a non-ASCII character, or holds `=` before its end.
    static func decodeThroughFoundation(_ text: String) -> [UInt8]? {
        var s = text.trimmingCharacters(in: .whitespacesAndNewlines)
        s = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.hasSuffix("=") { s.removeLast() }
        switch s.utf8.count % 4 {
        case 0: break
        case 2: s += "=="
        case 3: s += "="
        default: return nil
        }
        guard let data = Data(base64Encoded: s) else { return nil }
        return [UInt8](data)
    }

    /// Encodes as base64url without padding (RFC 7515 §2).
    static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
