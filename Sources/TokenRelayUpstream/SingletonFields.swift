import HTTPCommon
import TokenRelayBase

// A header or query parameter that names one thing (a key, an account, a deadline, a page) may
// appear once. With two, the request is ambiguous: reading the first would let a proxy and
// TokenRelay each act on a different one. RFC 9110 §5.3 lets a recipient combine only list
// fields; RFC 6749 §3.1 forbids repeating an OAuth parameter.

extension HTTPHeaders {
    /// The value of the field `name` when it appears at most once; nil when absent.
    /// - Throws: `RelayError` 400 `invalid_request` naming the field when it appears more than once.
    package func only(_ name: String) throws(RelayError) -> String? {
        guard let (value, repeated) = firstValue(name) else { return nil }
        guard !repeated else { throw RelayError.headerSentTwice(name) }
        return value
    }
}

extension HTTPRequest {
    /// The value of the query parameter `name` when it appears at most once; nil when absent.
    /// - Throws: `RelayError` 400 `invalid_request` naming the parameter when it appears more than once.
    package func onlyQueryValue(_ name: String) throws(RelayError) -> String? {
        var found: String?
        for item in query where item.name == name {
            guard found == nil else {
                throw RelayError.invalidRequest(field: name, "Send the query parameter '\(name)' once.")
            }
            found = item.value
        }
        return found
    }

    /// Every query parameter by name, each given once.
    /// - Throws: `RelayError` 400 `invalid_request` naming the first parameter given twice.
    package func uniqueQuery() throws(RelayError) -> [String: String] {
        var parameters: [String: String] = [:]
        for item in query {
            guard parameters.updateValue(item.value, forKey: item.name) == nil else {
                let name = QuotedText.shown(item.name)
                throw RelayError.invalidRequest(field: name, "Send the query parameter '\(name)' once.")
            }
        }
        return parameters
    }
}

/// Integers sent as text (a query parameter): decimal digits only (`+5`, ` 5` and `5.0` are no
/// page size or wait we hand out), leading zeros read as HTTP reads `1*DIGIT` and as
/// `Request-Timeout: 005` is (`limit=05` is 5: a number written with them is still an integer),
/// and the answer says which is wrong: not an integer, or one out of range.
package enum IntegerText {
    /// The value of `text` within `range`.
    /// - Throws: `RelayError` 400 `invalid_request` naming `field`.
    package static func parse(_ text: String, field: String, in range: ClosedRange<Int>, unit: String = "") throws(RelayError) -> Int {
        // An invisible character is named: `limit=1%00` reads as `1` wherever the value is shown.
        if let control = text.unicodeScalars.first(where: { $0.properties.generalCategory == .control }) {
            let code = "U+" + String(control.value, radix: 16, uppercase: true).leftPadded(to: 4)
            throw RelayError.invalidRequest(
                field: field,
                "'\(field)' may not contain control characters (here \(code)); it must be an integer from \(range.lowerBound) to \(range.upperBound)\(unit.isEmpty ? "" : " " + unit)."
            )
        }
        // An optional minus (every range here is of naturals: a negative is out of it), then digits.
        let digits = text.utf8.first == UInt8(ascii: "-") ? text.utf8.dropFirst() : text.utf8[...]
        guard !digits.isEmpty, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            throw RelayError.invalidRequest(
                field: field, "'\(field)' must be an integer (decimal digits) from \(range.lowerBound) to \(range.upperBound)\(unit.isEmpty ? "" : " " + unit)."
            )
        }
        // Digits that no Int holds are out of range too; leading zeros are read past (`Int("007")` is 7).
        guard let value = Int(text), range.contains(value) else {
            throw RelayError.invalidRequest(field: field, outOfRange(field, range, unit: unit))
        }
        return value
    }

    /// "'limit' is out of range: it must be from 1 to 200."
    package static func outOfRange(_ field: String, _ range: ClosedRange<Int>, unit: String = "") -> String {
        "'\(field)' is out of range: it must be from \(range.lowerBound) to \(range.upperBound)\(unit.isEmpty ? "" : " " + unit)."
    }
}

extension RelayError {
    /// 400 `invalid_request` naming a header field that may be sent once, sent more than once.
    package static func headerSentTwice(_ name: String) -> RelayError {
        .invalidRequest(field: name, "Send the header '\(name)' once.")
    }
}

extension String {
    /// The text with `0`s before it up to `width` characters (`"0"` → `"0000"`).
    fileprivate func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
