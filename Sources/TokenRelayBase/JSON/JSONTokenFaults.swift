/// Finds the first token of a JSON text that RFC 8259 refuses on its own: a control character
/// written raw inside a string (§7), an escape other than the eight of §7, a number outside §6's
/// grammar (`1.`, `-`, `1e`, `00`, `-01`, `.5`, `+1`), or a member name holding a `\u` escape of
/// half a surrogate pair (§8.2: no Unicode text, and no member to name).
///
/// `JSONBody` asks only after `JSONSerialization` refused a text, before ``UnreadableMembers``
/// names a member: that walk reads every string its decoder refuses as a lone surrogate and every
/// number as out of range, which for these tokens would blame a member for text that is no JSON.
/// Tokens only, no structure: a missing colon or bracket is left to the decoders.
/// - Complexity: O(n) in the text's bytes, one pass.
package enum JSONTokenFaults {
    package enum Fault: Equatable, Sendable {
        /// A byte below U+0020 inside a string (RFC 8259 §7: it must be escaped).
        case controlCharacterInString
        /// A backslash followed by anything but `"` `\` `/` `b` `f` `n` `r` `t` or `u` and four
        /// hexadecimal digits.
        case invalidEscape
        /// The text of a token that starts like a number and is none (RFC 8259 §6).
        case invalidNumber(String)
        /// A member name holding a `\u` escape of half a surrogate pair.
        case memberNameNotUnicode
    }

    /// The first fault in `bytes` (UTF-8 already checked), in text order; nil when every token
    /// is one RFC 8259 allows.
    package static func first(in bytes: [UInt8]) -> Fault? {
        var index = 0
        // Whether the last string read held a lone surrogate: a fault when a colon makes it a name.
        var lastStringNotUnicode = false
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                switch string(bytes, from: index + 1) {
                case .fault(let fault): return fault
                case .end(let after, let loneSurrogate):
                    lastStringNotUnicode = loneSurrogate
                    index = after
                }
                continue
            }
            if byte == UInt8(ascii: ":"), lastStringNotUnicode { return .memberNameNotUnicode }
            if isNumberStart(byte) {
                var end = index
                while end < bytes.count, isNumberByte(bytes[end]) { end += 1 }
                let token = bytes[index..<end]
                guard isNumber(token) else { return .invalidNumber(String(decoding: token, as: UTF8.self)) }
                index = end
                continue
            }
            index += 1
        }
        return nil
    }

    private enum StringEnd {
        case fault(Fault)
        /// `after`: the index past the closing quotation mark (the text's end when there is none).
        case end(after: Int, loneSurrogate: Bool)
    }

    /// Reads a string from just past its opening quotation mark.
    private static func string(_ bytes: [UInt8], from start: Int) -> StringEnd {
        var index = start
        var loneSurrogate = false
        // A high surrogate escape just read, waiting for its low half.
        var awaitingLow = false
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                return .end(after: index + 1, loneSurrogate: loneSurrogate || awaitingLow)
            }
            if byte < 0x20 { return .fault(.controlCharacterInString) }
            guard byte == UInt8(ascii: "\\") else {
                if awaitingLow { loneSurrogate = true }
                awaitingLow = false
                index += 1
                continue
            }
            guard index + 1 < bytes.count else { return .end(after: bytes.count, loneSurrogate: loneSurrogate) }
            switch bytes[index + 1] {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"), UInt8(ascii: "n"),
                UInt8(ascii: "r"), UInt8(ascii: "t"):
                if awaitingLow { loneSurrogate = true }
                awaitingLow = false
                index += 2
            case UInt8(ascii: "u"):
                guard let unit = hexUnit(bytes, at: index + 2) else { return .fault(.invalidEscape) }
                switch unit {
                case 0xD800...0xDBFF:
                    if awaitingLow { loneSurrogate = true }
                    awaitingLow = true
                case 0xDC00...0xDFFF:
                    if !awaitingLow { loneSurrogate = true }
                    awaitingLow = false
                default:
                    if awaitingLow { loneSurrogate = true }
                    awaitingLow = false
                }
                index += 6
            default:
                return .fault(.invalidEscape)
            }
        }
        return .end(after: bytes.count, loneSurrogate: loneSurrogate || awaitingLow)
    }

    /// The four hexadecimal digits at `index` as a UTF-16 code unit; nil when they are not four.
    private static func hexUnit(_ bytes: [UInt8], at index: Int) -> UInt16? {
        guard index + 4 <= bytes.count else { return nil }
        var unit: UInt16 = 0
        for byte in bytes[index..<index + 4] {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            unit = unit << 4 | UInt16(digit)
        }
        return unit
    }

    /// A byte only a number starts with outside strings (or that a reader may take for one: `+`, `.`).
    private static func isNumberStart(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "+")
            || byte == UInt8(ascii: ".")
    }

    private static func isNumberByte(_ byte: UInt8) -> Bool {
        isNumberStart(byte) || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E")
    }

    /// RFC 8259 §6: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    private static func isNumber(_ token: ArraySlice<UInt8>) -> Bool {
        var rest = token[...]
        func digits() -> Int {
            var count = 0
            while let byte = rest.first, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                rest.removeFirst()
                count += 1
            }
            return count
        }
        if rest.first == UInt8(ascii: "-") { rest.removeFirst() }
        if rest.first == UInt8(ascii: "0") {
            rest.removeFirst()
        } else if digits() == 0 {
            return false
        }
        if rest.first == UInt8(ascii: ".") {
            rest.removeFirst()
            guard digits() > 0 else { return false }
        }
        if rest.first == UInt8(ascii: "e") || rest.first == UInt8(ascii: "E") {
            rest.removeFirst()
            if rest.first == UInt8(ascii: "+") || rest.first == UInt8(ascii: "-") { rest.removeFirst() }
            guard digits() > 0 else { return false }
        }
        return rest.isEmpty
    }
}
