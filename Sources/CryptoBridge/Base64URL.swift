/// The URL- and filename-safe base64 alphabet (RFC 4648 §5) as JOSE uses it (RFC 7515 §2):
/// `-` and `_` instead of `+` and `/`, padding omitted.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Encodes `bytes` without `=` padding.
    public static func encode(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index + 3 <= bytes.count {
            let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            out.append(alphabet[Int(chunk >> 18 & 63)])
            out.append(alphabet[Int(chunk >> 12 & 63)])
            out.append(alphabet[Int(chunk >> 6 & 63)])
            out.append(alphabet[Int(chunk & 63)])
            index += 3
        }
        let rest = bytes.count - index
        if rest == 1 {
            let chunk = UInt32(bytes[index]) << 16
            out.append(alphabet[Int(chunk >> 18 & 63)])
            out.append(alphabet[Int(chunk >> 12 & 63)])
        } else if rest == 2 {
            let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            out.append(alphabet[Int(chunk >> 18 & 63)])
            out.append(alphabet[Int(chunk >> 12 & 63)])
            out.append(alphabet[Int(chunk >> 6 & 63)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes base64url text, with or without `=` padding.
    ///
    /// - Returns: The bytes, or nil for characters outside the URL-safe alphabet (including `+`
    ///   and `/`), whitespace, wrong padding, or a length no encoding produces.
    public static func decode(_ text: String) -> [UInt8]? {
        var symbols = Array(text.utf8)
        if symbols.count % 4 == 0, let firstPad = symbols.firstIndex(of: UInt8(ascii: "=")) {
            let padding = symbols.count - firstPad
            guard padding <= 2, symbols[firstPad...].allSatisfy({ $0 == UInt8(ascii: "=") }) else { return nil }
            symbols.removeLast(padding)
        }
        guard symbols.count % 4 != 1 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(symbols.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for symbol in symbols {
            guard let value = sextet(symbol) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        return out
    }

    /// Decodes base64url text only in the one spelling ``encode(_:)`` writes: no `=` padding,
    /// and the unused low bits of the last character zero (RFC 4648 §3.5 lets a decoder refuse
    /// other spellings). For identifiers, tags and cursors TokenRelay issued: every other
    /// spelling of the same bytes would be taken as the same identifier and echoed back as given.
    ///
    /// - Returns: The bytes, or nil for anything ``encode(_:)`` does not write.
    public static func decodeCanonical(_ text: String) -> [UInt8]? {
        guard !text.utf8.contains(UInt8(ascii: "=")), let bytes = decode(text) else { return nil }
        // Bits past the last whole byte: 2 (after 2 bytes) or 4 (after 1 byte) in the last symbol.
        guard let last = text.utf8.last, let value = sextet(last) else { return bytes }
        switch text.utf8.count % 4 {
        case 2: return value & 0x0F == 0 ? bytes : nil
        case 3: return value & 0x03 == 0 ? bytes : nil
        default: return bytes
        }
    }

    private static func sextet(_ symbol: UInt8) -> UInt8? {
        switch symbol {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): symbol - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): symbol - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): symbol - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: nil
        }
    }
}
