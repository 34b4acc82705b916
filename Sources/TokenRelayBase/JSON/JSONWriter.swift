import Foundation
import IdentityCore

/// Encodes response bodies. Keys are sorted so answers are stable byte for byte.
///
/// `JSONValue` is written by hand rather than through `JSONEncoder` (about 20 µs for a token
/// answer, a quarter of the cached silent path, behaviour §10). The bytes are the ones
/// `JSONEncoder` with `[.sortedKeys, .withoutEscapingSlashes]` produced before: keys in UTF-8
/// byte order; strings escaped per RFC 8259 §7 (`\"`, `\\`, `\b \f \n \r \t`, other controls
/// as `\u00xx`, everything else as UTF-8); integral numbers without a fraction.
package enum JSONWriter {
    package static func encode(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        // A non-finite number has no JSON form; the encoder failed on it and "{}" was sent.
        guard write(value, into: &out) else { return Array("{}".utf8) }
        return out
    }

    /// Appends `value`; false when it holds a NaN or infinite number.
    package static func write(_ value: JSONValue, into out: inout [UInt8]) -> Bool {
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
    package static func sortedKeys(_ members: [String: JSONValue]) -> [String] {
        members.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// A JSON string literal (RFC 8259 §7).
    package static func writeString(_ text: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        let utf8 = text.utf8
        if !needsEscaping(utf8.span) {
            // The common case (tokens, ids): one contiguous copy.
            out.append(contentsOf: utf8)
        } else {
            for byte in utf8 {
                guard needsEscaping(byte) else {
                    out.append(byte)
                    continue
                }
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
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Whether some byte needs escaping. A `Span` (safe, bounds-checked) scan: access tokens run
    /// to kilobytes and almost never need it. Each 64-byte block is folded without branches so
    /// the compiler can use vector instructions (a byte-at-a-time loop with an early exit was
    /// about 7 instructions per byte, an eighth of a cached silent request; behaviour §10).
    package static func needsEscaping(_ bytes: Span<UInt8>) -> Bool {
        var start = 0
        while start < bytes.count {
            let end = min(start + 64, bytes.count)
            var found: UInt8 = 0
            for index in start..<end {
                let byte = bytes[index]
                found |= (byte < 0x20 ? 1 : 0) | (byte == UInt8(ascii: "\"") ? 1 : 0) | (byte == UInt8(ascii: "\\") ? 1 : 0)
            }
            if found != 0 { return true }
            start = end
        }
        return false
    }

    /// A control character, `"` or `\`.
    package static func needsEscaping(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    /// Integral values below 10^15 as integers; others as Swift's shortest round-trip form
    /// without a trailing `.0` (`1e+20`, `0.1`, `-0`), as `JSONEncoder` wrote them.
    package static func writeNumber(_ number: Double, into out: inout [UInt8]) -> Bool {
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
