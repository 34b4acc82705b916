import Foundation
import HTTPCommon
import IdentityCore

/// Encodes response bodies. Keys are sorted so answers are stable byte for byte.
///
/// `JSONValue` is written by hand rather than through `JSONEncoder` (about 20 µs for a token
/// answer, a quarter of the cached silent path, SPEC §10). The bytes are the ones
/// `JSONEncoder` with `[.sortedKeys, .withoutEscapingSlashes]` produced before: keys in UTF-8
/// byte order; strings escaped per RFC 8259 §7 (`\"`, `\\`, `\b \f \n \r \t`, other controls
/// as `\u00xx`, everything else as UTF-8); integral numbers without a fraction.
enum JSONWriter {
    static func encode(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        // A non-finite number has no JSON form; the encoder failed on it and "{}" was sent.
        guard write(value, into: &out) else { return Array("{}".utf8) }
        return out
    }

    static func encode<T: Encodable>(encodable value: T) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(value))
    }

    /// Appends `value`; false when it holds a NaN or infinite number.
    static func write(_ value: JSONValue, into out: inout [UInt8]) -> Bool {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let flag): out.append(contentsOf: flag ? "true".utf8 : "false".utf8)
        case .number(let number): return writeNumber(number, into: &out)
        case .string(let text): writeString(text, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                guard write(item, into: &out) else { return false }
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (index, key) in sortedKeys(members).enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                guard write(members[key]!, into: &out) else { return false }
            }
            out.append(UInt8(ascii: "}"))
        }
        return true
    }

    /// Object keys in UTF-8 byte order (what `JSONEncoder.sortedKeys` gives; `String.<`
    /// compares normalised scalars and can differ for non-ASCII keys).
    static func sortedKeys(_ members: [String: JSONValue]) -> [String] {
        members.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// A JSON string literal (RFC 8259 §7).
    static func writeString(_ text: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            guard needsEscaping(bytes) else {
                out.append(contentsOf: bytes)
                return
            }
            var start = 0
            for index in 0..<bytes.count {
                let byte = bytes[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                start = index + 1
                out.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(byte)
                case 0x08: out.append(UInt8(ascii: "b"))
                case 0x0C: out.append(UInt8(ascii: "f"))
                case 0x0A: out.append(UInt8(ascii: "n"))
                case 0x0D: out.append(UInt8(ascii: "r"))
                case 0x09: out.append(UInt8(ascii: "t"))
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...]))
        }
        out.append(UInt8(ascii: "\""))
    }

    /// True when some byte is a control character, `"` or `\`; eight bytes at a time, as
    /// access tokens run to kilobytes and almost never need it.
    static func needsEscaping(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        var index = 0
        if let base = UnsafeRawPointer(bytes.baseAddress) {
            while index + 8 <= bytes.count {
                let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                // A byte below 0x20, or equal to 0x22 or 0x5C, leaves its high bit set in one of these.
                let control = (word &- ones &* 0x20) & ~word
                let quote = ((word ^ (ones &* 0x22)) &- ones) & ~(word ^ (ones &* 0x22))
                let backslash = ((word ^ (ones &* 0x5C)) &- ones) & ~(word ^ (ones &* 0x5C))
                if (control | quote | backslash) & highs != 0 { return true }
                index += 8
            }
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return true }
            index += 1
        }
        return false
    }

    /// Integral values below 10^15 as integers; others as Swift's shortest round-trip form
    /// without a trailing `.0` (`1e+20`, `0.1`, `-0`), as `JSONEncoder` wrote them.
    static func writeNumber(_ number: Double, into out: inout [UInt8]) -> Bool {
        guard number.isFinite else { return false }
        if number == number.rounded(), abs(number) < 1e15, !(number == 0 && number.sign == .minus) {
            out.append(contentsOf: String(Int64(number)).utf8)
        } else {
            var text = number.description
            if text.hasSuffix(".0") { text.removeLast(2) }
            out.append(contentsOf: text.utf8)
        }
        return true
    }
}

extension HTTPResponse {
    /// A JSON answer with `Content-Type: application/json`.
    static func json(_ status: Int, _ value: JSONValue, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        json(status, bytes: JSONWriter.encode(value), headers: headers)
    }

    /// A JSON answer whose body is already encoded.
    static func json(_ status: Int, bytes: [UInt8], headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        var headers = headers
        headers.set("Content-Type", "application/json")
        return HTTPResponse(status: status, headers: headers, body: bytes)
    }
}
