import Foundation
import HTTPCommon
import IdentityCore
import TokenRelayBase
import TokenRelayUpstream

/// A request's JSON object body with typed accessors whose errors name the field (400
/// `invalid_request` with `field`), so callers learn exactly what to fix.
///
/// The one JSON reader of request bodies, for every route and both steps of the request
/// pipeline (ADR 0013): Foundation's `JSONSerialization`, measured faster than `JSONDecoder` on
/// libmicrohttpd's threads (ADR 0006). A member named twice in one object is refused (400
/// naming it, behaviour §4.5) rather than collapsed to one value as `JSONSerialization` would.
package struct JSONBody: Sendable {
    package let members: [String: JSONValue]

    /// Parses the body of `request`.
    /// - Throws: `RelayError` 415 when the content type is not JSON, 400 when the body is not a JSON object.
    package init(_ request: HTTPRequest) throws(RelayError) {
        try Self.requireJSON(request)
        try self.init(bytes: request.body)
    }

    /// Parses `bytes` (the content type already checked).
    /// - Throws: `RelayError` 400 naming `body` when they are empty, not JSON (saying which token
    ///   RFC 8259 refuses, ``JSONTokenFaults``) or not a JSON object, and 400 naming the member (its
    ///   dotted path when nested) when an object names a member twice, holds a number out of a
    ///   Double's range (`1e400`) or a string with a lone surrogate escape (`"\ud800"`).
    package init(bytes: [UInt8]) throws(RelayError) {
        guard !bytes.isEmpty else {
            throw RelayError.invalidRequest(field: "body", "The request body is empty; a JSON object is required.")
        }
        try Self.requireStrictText(bytes)
        let object: Any
        do {
            // Fragments allowed so a bare `3` is "not an object" rather than "not JSON", as before.
            object = try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
        } catch {
            // `JSONSerialization` refuses a whole text for one number a Double cannot hold, or
            // one string holding a lone surrogate escape, and for text that is no JSON. The last
            // is told by its tokens first: the walk below takes every string its decoder refuses
            // for a lone surrogate and every number for one out of range.
            if let fault = JSONTokenFaults.first(in: bytes) { throw Self.notJSON(fault) }
            switch UnreadableMembers.first(in: bytes) {
            // The client's names are quoted shortened (``QuotedText``), here and below.
            case (let member, .numberOutOfRange)?:
                let member = QuotedText.shown(member)
                throw RelayError.invalidRequest(field: member, "'\(member)' is a number out of range.")
            case (let member, .stringNotUnicode)?:
                let member = QuotedText.shown(member)
                throw RelayError.invalidRequest(
                    field: member, "'\(member)' is not Unicode text: a \\u escape names half of a surrogate pair (RFC 8259 §8.2).")
            case nil:
                break
            }
            throw RelayError.invalidRequest(field: "body", "The request body is not valid JSON.")
        }
        var tally = Tally()
        guard let value = Self.value(object, tally: &tally) else {
            throw RelayError.invalidRequest(field: "body", "The request body is not valid JSON.")
        }
        guard case .object(let members) = value else {
            throw RelayError.invalidRequest(field: "body", "The request body must be a JSON object.")
        }
        if tally.mayHideDuplicates(rawQuotes: Self.quotationMarks(in: bytes)), let member = DuplicateMembers.first(in: bytes).map(QuotedText.shown) {
            throw RelayError.invalidRequest(field: member, "The member '\(member)' is given more than once.")
        }
        self.members = members
    }

    /// 400 naming `body` for a token RFC 8259 refuses, saying which.
    private static func notJSON(_ fault: JSONTokenFaults.Fault) -> RelayError {
        let reason =
            switch fault {
            case .controlCharacterInString: "a control character (U+0000 to U+001F) is written unescaped inside a string (RFC 8259 §7)"
            case .invalidEscape: #"a string holds an escape other than \", \\, \/, \b, \f, \n, \r, \t or \u and four hexadecimal digits (RFC 8259 §7)"#
            case .invalidNumber(let text): "'\(QuotedText.shown(text))' is not a JSON number (RFC 8259 §6)"
            case .memberNameNotUnicode: "a member name is not Unicode text: a \\u escape names half of a surrogate pair (RFC 8259 §8.2)"
            }
        return RelayError.invalidRequest(field: "body", "The request body is not valid JSON: \(reason).")
    }

    /// The deepest nesting of objects and arrays a body may have, the outermost counted: the
    /// depth `JSONSerialization` itself reads (it refuses 513 levels, and that refusal was
    /// answered "not valid JSON"). No route's body nests more than a few levels.
    package static let maxNestingDepth = 512

    /// What `JSONSerialization` accepts and RFC 8259 does not: text in UTF-16 or UTF-32 (it
    /// detects the encoding; §8.1 requires UTF-8, and the duplicate-member check reads UTF-8),
    /// and a comma before `}` or `]` (§4, §5); and nesting deeper than ``maxNestingDepth``
    /// (RFC 8259 §9 lets a parser limit it), named by the top-level member it is in. One pass
    /// outside string literals.
    /// - Throws: `RelayError` 400 naming `body`, or the member nested too deep.
    package static func requireStrictText(_ bytes: [UInt8]) throws(RelayError) {
        // UTF-16 and UTF-32 are valid UTF-8 when the text is ASCII, but JSON text starts with an
        // ASCII character, so in them one of the first two bytes is zero (RFC 4627 §3). A zero
        // byte later is U+0000 in UTF-8, which JSON text holds only escaped (`\u0000`).
        let nul = bytes.firstIndex(of: 0)
        guard String(validating: bytes, as: UTF8.self) != nil, (nul ?? 2) >= 2 else {
            throw RelayError.invalidRequest(field: "body", "The request body must be JSON text in UTF-8 (RFC 8259 §8.1).")
        }
        guard nul == nil else {
            throw RelayError.invalidRequest(field: "body", "The request body is not valid JSON: it holds a NUL byte (U+0000) (RFC 8259 §2, §7).")
        }
        var inString = false
        var escaped = false
        var afterComma = false
        var depth = 0
        // The last string that started at the top object's level, and the member name it became
        // once a colon followed: the top-level member being read (byte offsets in `bytes`).
        var stringStart = 0
        var lastTopString: Range<Int>?
        var topMember: Range<Int>?
        for (index, byte) in bytes.enumerated() {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                    if depth == 1 { lastTopString = stringStart..<index }
                }
                continue
            }
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                continue
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                if depth > maxNestingDepth { throw nestedTooDeep(bytes, member: topMember) }
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if afterComma {
                    throw RelayError.invalidRequest(field: "body", "The request body is not valid JSON: a comma before '}' or ']' (RFC 8259 §4).")
                }
                depth -= 1
            case UInt8(ascii: ":") where depth == 1:
                topMember = lastTopString
            case UInt8(ascii: "\""):
                inString = true
                stringStart = index + 1
            default:
                break
            }
            afterComma = byte == UInt8(ascii: ",")
        }
    }

    /// 400 for a body nested deeper than ``maxNestingDepth``, naming the top-level member it is
    /// in when the body is an object and the member's name is written without escapes.
    private static func nestedTooDeep(_ bytes: [UInt8], member: Range<Int>?) -> RelayError {
        if bytes.first(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }) == UInt8(ascii: "{"), let member,
            !bytes[member].contains(UInt8(ascii: "\\")), let name = String(validating: bytes[member], as: UTF8.self).map(QuotedText.shown)
        {
            return RelayError.invalidRequest(field: name, "'\(name)' is nested deeper than \(maxNestingDepth) levels of objects and arrays.")
        }
        return RelayError.invalidRequest(field: "body", "The request body is nested deeper than \(maxNestingDepth) levels of objects and arrays.")
    }

    /// What the parsed value holds, to tell from the raw text whether `JSONSerialization`
    /// dropped a repeated member. Every name and string value is written between two raw `"`;
    /// a `"` inside one is written `\"` (one more raw mark) or `\u0022` (none). So with no `"`
    /// inside any string, the text has exactly two marks per name and string value unless a
    /// member was dropped, and a dropped member (its name at least) leaves marks unaccounted for.
    private struct Tally {
        var names = 0
        var strings = 0
        var quotesInside = 0

        mutating func add(string text: String, isName: Bool) {
            if isName { names += 1 } else { strings += 1 }
            for byte in text.utf8 where byte == UInt8(ascii: "\"") { quotesInside += 1 }
        }

        /// False only when the count proves no member was dropped; true sends the text to the
        /// exact (slower) check.
        func mayHideDuplicates(rawQuotes: Int) -> Bool {
            quotesInside > 0 || rawQuotes != 2 * (names + strings)
        }
    }

    private static func quotationMarks(in bytes: [UInt8]) -> Int {
        var count = 0
        for byte in bytes where byte == UInt8(ascii: "\"") { count += 1 }
        return count
    }

    package init(members: [String: JSONValue]) { self.members = members }

    /// 415 naming `Content-Type` unless the request says its body is JSON in UTF-8:
    /// `application/json` or `application/*+json`, any case, with parameters (RFC 9110 §8.3.1:
    /// `; name=value`, the value a token or a quoted string). JSON's registration defines no
    /// parameter and other ones are ignored, but a `charset` other than `utf-8` (any case,
    /// quoted or not) says the body is in another encoding, which JSON between systems never is
    /// (RFC 8259 §8.1), and a parameter that is not `name=value` is no media type. 400 naming
    /// `Content-Type` when it is sent twice. 415 naming `Content-Encoding` for a body in a coding
    /// (``HTTPCommon/HTTPHeaders/requireIdentityCoding()``).
    package static func requireJSON(_ request: HTTPRequest) throws(RelayError) {
        try request.headers.requireIdentityCoding()
        // The usual field, one of the exact plain values, settled on its bytes where they lie: a
        // `String` of it and a second look-up for the repeat were most of this check.
        if request.headers.withFirstValue("Content-Type", { value, repeated in !repeated && isPlainJSON(value) }) == true { return }
        let declared = try request.headers.only("Content-Type")
        var parts = (declared ?? "").split(separator: ";", omittingEmptySubsequences: false)
        let mediaType = parts.isEmpty ? "" : parts.removeFirst().trimmingCharacters(in: .whitespaces).lowercased()
        guard mediaType == "application/json" || (mediaType.hasPrefix("application/") && mediaType.hasSuffix("+json")) else {
            throw RelayError(.unsupportedMediaType, "The request body must be application/json.", extensions: ["field": .string("Content-Type")])
        }
        for part in parts {
            let parameter = part.trimmingCharacters(in: .whitespaces)
            if parameter.isEmpty { continue }
            guard let equals = parameter.firstIndex(of: "="),
                case let name = parameter[..<equals].trimmingCharacters(in: .whitespaces), !name.isEmpty,
                let value = parameterValue(parameter[parameter.index(after: equals)...].trimmingCharacters(in: .whitespaces))
            else {
                throw RelayError(
                    .unsupportedMediaType, "The Content-Type parameter '\(parameter)' is not name=value.", extensions: ["field": .string("Content-Type")])
            }
            if name.lowercased() == "charset" && value.lowercased() != "utf-8" {
                throw RelayError(
                    .unsupportedMediaType, "A JSON body must be UTF-8 (RFC 8259 §8.1); send charset=utf-8 or no charset.",
                    extensions: ["field": .string("Content-Type")])
            }
        }
    }

    /// A parameter's value: a non-empty token as it is, a quoted string without its quotes and
    /// escapes (RFC 9110 §5.6.4); nil when it is neither.
    private static func parameterValue(_ text: String) -> String? {
        guard text.hasPrefix("\"") else { return text.isEmpty || text.contains("\"") ? nil : text }
        var value = ""
        var escaped = false
        var rest = text.dropFirst()
        while let character = rest.popFirst() {
            if escaped {
                value.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "\"" {
                return rest.isEmpty ? value : nil
            } else {
                value.append(character)
            }
        }
        return nil
    }

    /// `JSONSerialization`'s objects as a `JSONValue`. Booleans arrive as `NSNumber`s of type
    /// `c` (`__NSCFBoolean`); every other number becomes a Double, as `JSONDecoder` gave it.
    private static func value(_ object: Any, tally: inout Tally) -> JSONValue? {
        switch object {
        case let text as String:
            tally.add(string: text, isName: false)
            return .string(text)
        case let number as NSNumber:
            if number.objCType.pointee == CChar(UInt8(ascii: "c")) { return .bool(number.boolValue) }
            return .number(number.doubleValue)
        case let items as [Any]:
            var values: [JSONValue] = []
            values.reserveCapacity(items.count)
            for item in items {
                guard let value = value(item, tally: &tally) else { return nil }
                values.append(value)
            }
            return .array(values)
        case let members as [String: Any]:
            var values: [String: JSONValue] = [:]
            values.reserveCapacity(members.count)
            for (name, item) in members {
                guard let value = value(item, tally: &tally) else { return nil }
                tally.add(string: name, isName: true)
                values[name] = value
            }
            return .object(values)
        case is NSNull:
            return .null
        default:
            return nil
        }
    }

    /// `application/json`, alone or with `charset=utf-8` as clients usually write it, compared
    /// whole on its bytes; every other spelling (parameters, `+json`, odd case, spaces) is left to
    /// the full check of ``requireJSON(_:)``.
    private static func isPlainJSON(_ bytes: Span<UInt8>) -> Bool {
        for plain in plainJSONValues where plain.count == bytes.count {
            var differ: UInt8 = 0
            for index in 0..<bytes.count { differ |= bytes[index] ^ plain[index] }
            if differ == 0 { return true }
        }
        return false
    }

    private static let plainJSONValues: [[UInt8]] = [
        Array("application/json".utf8), Array("application/json; charset=utf-8".utf8), Array("application/json;charset=UTF-8".utf8),
    ]

    package func has(_ field: String) -> Bool {
        if let value = members[field], value != .null { return true }
        return false
    }

    /// - Throws: `RelayError` 400 naming `field` when it is not a string, or holds U+0000: no member
    ///   of the API can (PostgreSQL text cannot), and refused later it named no field.
    package func string(_ field: String) throws(RelayError) -> String? {
        switch members[field] {
        case nil, .null?: return nil
        case .string(let text)?:
            guard !text.utf8.contains(0) else { throw RelayError.invalidRequest(field: field, "'\(field)' may not contain NUL (U+0000).") }
            return text
        default: throw RelayError.invalidRequest(field: field, "'\(field)' must be a string.")
        }
    }

    /// A member that names something (an account id, a home_account_id, a username, a tenant):
    /// nil when absent or null. An empty one names nothing and was looked up as a name (an empty
    /// `account_id` on a sign-in was 404 `account_not_found`): it is a malformed request.
    /// - Throws: `RelayError` 400 naming `field` when it is not a string, is empty or holds U+0000.
    package func identifier(_ field: String) throws(RelayError) -> String? {
        guard let text = try string(field) else { return nil }
        guard !text.isEmpty else { throw RelayError.invalidRequest(field: field, "'\(field)' may not be empty.") }
        return text
    }

    package func requiredString(_ field: String) throws(RelayError) -> String {
        guard let text = try string(field), !text.isEmpty else {
            throw RelayError.invalidRequest(field: field, "'\(field)' is required.")
        }
        return text
    }

    package func bool(_ field: String) throws(RelayError) -> Bool? {
        switch members[field] {
        case nil, .null?: return nil
        case .bool(let flag)?: return flag
        default: throw RelayError.invalidRequest(field: field, "'\(field)' must be true or false.")
        }
    }

    /// A whole number within `range` (`3` and `3.0` alike); nil when absent or null.
    /// - Throws: `RelayError` 400 `invalid_request` naming `field`, saying which it is: not an
    ///   integer (a fraction, text, a boolean), or an integer out of `range` (however large: one
    ///   past `Int`'s range was called "not an integer" before).
    package func int(_ field: String, in range: ClosedRange<Int>, unit: String = "") throws(RelayError) -> Int? {
        switch members[field] {
        case nil, .null?: return nil
        case .number(let number)? where number.isFinite && number == number.rounded(.towardZero):
            // Compared as Doubles, so a number no Int holds is out of range rather than trapping.
            guard number >= Double(range.lowerBound) && number <= Double(range.upperBound) else {
                throw RelayError.invalidRequest(field: field, IntegerText.outOfRange(field, range, unit: unit))
            }
            return Int(number)
        default: throw RelayError.invalidRequest(field: field, "'\(field)' must be an integer.")
        }
    }

    package func stringArray(_ field: String) throws(RelayError) -> [String]? {
        switch members[field] {
        case nil, .null?: return nil
        case .array(let items)?:
            var strings: [String] = []
            for item in items {
                guard case .string(let text) = item else {
                    throw RelayError.invalidRequest(field: field, "'\(field)' must be an array of strings.")
                }
                strings.append(text)
            }
            return strings
        default: throw RelayError.invalidRequest(field: field, "'\(field)' must be an array of strings.")
        }
    }

    /// The body's `correlation_id` (nil when absent or empty). It becomes the `client-request-id`
    /// response header, so it must fit one: at most 128 printable ASCII characters, the header's
    /// own rule (a line break made the HTTP layer answer a bare 500; a long one closed the connection).
    /// - Throws: `RelayError` 400 `invalid_request` naming `correlation_id`.
    package func correlationId() throws(RelayError) -> String? {
        guard let text = try string("correlation_id"), !text.isEmpty else { return nil }
        guard Self.isUsableCorrelationId(text) else {
            throw RelayError.invalidRequest(field: "correlation_id", "'correlation_id' must be at most 128 printable ASCII characters.")
        }
        return text
    }

    /// At most 128 characters, each printable ASCII (U+0020–U+007E).
    package static func isUsableCorrelationId(_ text: String) -> Bool {
        text.utf8.count <= 128 && text.utf8.allSatisfy { $0 == 0x20 || $0.isASCIIVisible }
    }

    /// The body's `min_ttl_s`: seconds the answered token must still be valid, 0 (the default) to 86400.
    /// - Throws: `RelayError` 400 `invalid_request` naming `min_ttl_s` (not an integer, or out of range).
    package func minTTLSeconds() throws(RelayError) -> Int {
        try int("min_ttl_s", in: 0...86_400, unit: "seconds") ?? 0
    }

    /// A claims request given as a JSON object or as JSON text (behaviour §1).
    package func claims(_ field: String) throws(RelayError) -> String? {
        switch members[field] {
        case nil, .null?: return nil
        case .string(let text)?: return text.isEmpty ? nil : text
        case .object?:
            return String(decoding: JSONWriter.encode(members[field]!), as: UTF8.self)
        default: throw RelayError.invalidRequest(field: field, "'\(field)' must be a JSON object or JSON text.")
        }
    }

    /// Rejects members the route does not know, so a typo is an error rather than ignored.
    package func rejectUnknown(allowed: Set<String>) throws(RelayError) {
        guard !members.keys.allSatisfy(allowed.contains) else { return }
        // Several unknown members: name the first in sorted order, so the answer is stable.
        if let unknown = members.keys.sorted().first(where: { !allowed.contains($0) }).map(QuotedText.shown) {
            throw RelayError.invalidRequest(field: unknown, "Unknown field '\(unknown)'.")
        }
    }
}
