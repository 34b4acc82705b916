/// `application/x-www-form-urlencoded` reading and writing (WHATWG URL §5), used for token
/// request bodies, HTTP Basic client credentials and redirect queries.
enum FormEncoding {
    /// Parses `a=1&b=x+y`; later duplicates are kept in order.
    static func parse(_ bytes: [UInt8]) -> [(name: String, value: String)] {
        parse(String(decoding: bytes, as: UTF8.self))
    }

    static func parse(_ text: String) -> [(name: String, value: String)] {
        text.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (decode(String(parts[0])), parts.count > 1 ? decode(String(parts[1])) : "")
        }
    }

    /// Percent-decodes, turning `+` into a space; invalid escapes are kept as they are.
    static func decode(_ text: String) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "+") {
                bytes.append(0x20)
            } else if byte == UInt8(ascii: "%"), utf8.count >= 2,
                let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Percent-encodes everything but unreserved characters (RFC 3986 §2.3).
    static func encode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
            }
        }
        return out
    }

    /// `name=value&...`, each side percent-encoded.
    static func serialize(_ fields: [(String, String)]) -> String {
        fields.map { encode($0.0) + "=" + encode($0.1) }.joined(separator: "&")
    }
}
