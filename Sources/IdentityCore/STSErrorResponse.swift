import Foundation

/// An error code from the STS's description or `error_codes`: Entra ID's `AADSTS{n}` or
/// Azure AD B2C's `AADB2C{n}` (the two number spaces are distinct).
public enum STSErrorCode: Sendable, Hashable, CustomStringConvertible {
    case aadsts(Int)
    case aadb2c(Int)

    public var number: Int {
        switch self {
        case .aadsts(let n), .aadb2c(let n): n
        }
    }

    /// `AADSTS700082` / `AADB2C90080`.
    public var description: String {
        switch self {
        case .aadsts(let n): "AADSTS\(n)"
        case .aadb2c(let n): "AADB2C\(n)"
        }
    }
}

/// An OAuth error body from the token endpoint (RFC 6749 §5.2 plus the identity platform's
/// `error_codes`, `suberror`, `trace_id`, `correlation_id`, `claims`).
///
/// Parsed leniently (behaviour §5): a plain-text body (case 10 "Too Many Requests") gives
/// `error == nil`; B2C bodies carry only `error` and `error_description` (case 08), so the
/// codes and ids are also read from the description text.
public struct STSErrorResponse: Sendable, Equatable {
    public let error: String?
    public let errorDescription: String?
    /// From `error_codes`, else every `AADSTS{n}` / `AADB2C{n}` in the description.
    public let errorCodes: [Int]
    /// `errorCodes` with their prefix, for table lookups and messages.
    public let codes: [STSErrorCode]
    /// Verbatim; nil when the STS sent none.
    public let suberror: String?
    public let traceId: String?
    public let correlationId: String?
    /// The claims challenge as JSON text, whether it arrived as JSON text or base64.
    public let claims: String?

    /// Parses an error body; never throws.
    /// - Parameter body: the response body (JSON, or anything else).
    public static func parse(_ body: [UInt8]) -> STSErrorResponse {
        guard let object = JSONValue.parse(body)?.objectValue else {
            return STSErrorResponse(
                error: nil, errorDescription: nil, errorCodes: [], codes: [], suberror: nil, traceId: nil, correlationId: nil,
                claims: nil)
        }
        func text(_ key: String) -> String? {
            guard let value = object[key]?.stringValue, !value.isEmpty else { return nil }
            return value
        }
        let description = text("error_description")
        var codes: [STSErrorCode] = []
        if let list = object["error_codes"]?.arrayValue {
            codes = list.compactMap(\.intValue).map { .aadsts($0) }
        }
        if codes.isEmpty, let description {
            codes = Self.codes(in: description)
        }
        var claims: String?
        switch object["claims"] {
        case .string(let value)?: claims = ClaimsRequest.decodedText(value)
        case .object?: claims = object["claims"]?.compactSortedText
        default: claims = nil
        }
        return STSErrorResponse(
            error: text("error"),
            errorDescription: description,
            errorCodes: codes.map(\.number),
            codes: codes,
            suberror: text("suberror"),
            traceId: text("trace_id") ?? description.flatMap { Self.labelled("Trace ID:", in: $0) },
            correlationId: text("correlation_id") ?? description.flatMap { Self.labelled("Correlation ID:", in: $0) },
            claims: claims)
    }

    /// Every `AADSTS{digits}` and `AADB2C{digits}` in a description, in order, no repeats.
    static func codes(in description: String) -> [STSErrorCode] {
        var found: [STSErrorCode] = []
        let scalars = Array(description.utf8)
        var index = 0
        while index + 6 < scalars.count {
            let prefix = String(decoding: scalars[index..<index + 6], as: UTF8.self)
            if prefix == "AADSTS" || prefix == "AADB2C" {
                var end = index + 6
                while end < scalars.count, scalars[end] >= 48, scalars[end] <= 57 { end += 1 }
                if end > index + 6, let number = Int(String(decoding: scalars[(index + 6)..<end], as: UTF8.self)) {
                    let code: STSErrorCode = prefix == "AADSTS" ? .aadsts(number) : .aadb2c(number)
                    if !found.contains(code) { found.append(code) }
                }
                index = end
            } else {
                index += 1
            }
        }
        return found
    }

    /// The whitespace-delimited word after `label` ("Trace ID: <id>").
    static func labelled(_ label: String, in description: String) -> String? {
        guard let range = description.range(of: label) else { return nil }
        let rest = description[range.upperBound...].drop { $0 == " " }
        let word = rest.prefix { !$0.isWhitespace && $0 != "," }
        return word.isEmpty ? nil : String(word)
    }

    /// The first sentence of the description with its code: safe for `detail` (the STS
    /// never puts tokens in descriptions; the text is cut before the trace ids).
    var summary: String? {
        guard let errorDescription else { return nil }
        var text = errorDescription
        if let cut = text.range(of: "\r\n") ?? text.range(of: "\n") { text = String(text[..<cut.lowerBound]) }
        if let cut = text.range(of: " Trace ID:") { text = String(text[..<cut.lowerBound]) }
        if let colon = text.range(of: ": "), text.hasPrefix("AAD") {
            let head = text[..<colon.upperBound]
            let body = text[colon.upperBound...]
            if let stop = body.range(of: ". ") {
                text = String(head) + String(body[..<stop.lowerBound]) + "."
            }
        } else if let stop = text.range(of: ". ") {
            text = String(text[..<stop.lowerBound]) + "."
        }
        if text.count > 300 { text = String(text.prefix(300)) + "…" }
        return text
    }
}
