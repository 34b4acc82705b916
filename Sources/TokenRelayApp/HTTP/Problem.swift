import Foundation
import HTTPCommon
import IdentityCore

/// An RFC 9457 problem the service answers with (`application/problem+json`).
///
/// `type` is `urn:tokenrelay:problem:{error}` and `error` the stable machine code (behaviour §4, §12).
/// Extra members (`field`, `suberror`, `sts_error_codes`, ...) travel in `extensions`.
struct Problem: Error, Sendable {
    var code: ProblemCode
    var detail: String
    var status: Int
    var extensions: [String: JSONValue]
    var headers: HTTPHeaders
    /// What went wrong underneath, for the log only; never rendered to the caller.
    var cause: String?
    /// The correlation id that names this answer when a route learned one the handler could not
    /// (the body's `correlation_id`, behaviour §12).
    var correlationId: String?
    /// Who should sign in again, and for what: the handler mints the problem's `sign_in_url`
    /// from it when it renders the answer (behaviour §12: freshly minted on every answer, replays too).
    var signInHint: SignInHint?
    /// Where a person's browser may go back to after a failed sign-in: the sign-in's
    /// `redirect_after` with `error` added (``BrowserPage``); never in the problem+json body.
    var returnTo: String?
    /// Set for the STS's policy answers (MFA, consent, conditional access) that the UI-required
    /// memory may replay (behaviour §5); never for TokenRelay's own refusals.
    var replayable = false

    init(_ code: ProblemCode, _ detail: String, status: Int? = nil, extensions: [String: JSONValue] = [:], headers: HTTPHeaders = HTTPHeaders()) {
        self.code = code
        self.detail = detail
        self.status = status ?? code.status
        self.extensions = extensions
        self.headers = headers
    }

    /// 400 `invalid_request` naming the offending field.
    static func invalidRequest(field: String, _ detail: String) -> Problem {
        Problem(.invalidRequest, detail, extensions: ["field": .string(field)])
    }

    static func accountNotFound() -> Problem {
        Problem(.accountNotFound, "No account matches the given identifier.")
    }

    /// 503 `upstream_unavailable` with `Retry-After` (behaviour §12: always carried).
    static func unavailable(_ detail: String, retryAfterSeconds: Int) -> Problem {
        var headers = HTTPHeaders()
        headers.set("Retry-After", String(retryAfterSeconds))
        return Problem(.upstreamUnavailable, detail, extensions: ["retry_after_s": .number(Double(retryAfterSeconds))], headers: headers)
    }

    /// 429 `throttled` with `Retry-After` and `retry_after_s` (behaviour §4, §12: always carried).
    static func throttled(_ detail: String, retryAfterSeconds: Int) -> Problem {
        var headers = HTTPHeaders()
        headers.set("Retry-After", String(retryAfterSeconds))
        return Problem(.throttled, detail, extensions: ["retry_after_s": .number(Double(retryAfterSeconds))], headers: headers)
    }

    func response(correlationId: String) -> HTTPResponse {
        // Sized once, with room for the `client-request-id` the pipeline adds.
        var headers = HTTPHeaders(minimumCapacity: self.headers.count + 2)
        headers.add("Content-Type", "application/problem+json")
        for (name, value) in self.headers where !name.caseInsensitiveEquals("Content-Type") { headers.add(name, value) }
        return HTTPResponse(status: status, headers: headers, body: body(correlationId: correlationId))
    }

    /// The RFC 9457 members, in UTF-8 key order as ``JSONWriter`` writes every object, and the
    /// extensions merged in: written straight into bytes, the standard members without a
    /// `JSONValue` each (hashing and sorting them was a fifth of a 401's cost, building them a
    /// tenth of a 404's; behaviour §10). The standard members win over an extension of the same name.
    func body(correlationId: String) -> [UInt8] {
        let extra = extensions.isEmpty ? [] : JSONWriter.sortedKeys(extensions).filter { key in !Self.standardMembers.contains(key) }
        var out: [UInt8] = []
        out.reserveCapacity(320)
        out.append(UInt8(ascii: "{"))
        var nextExtra = 0
        var writable = true
        func name(_ key: String) {
            if out.count > 1 { out.append(UInt8(ascii: ",")) }
            JSONWriter.writeString(key, into: &out)
            out.append(UInt8(ascii: ":"))
        }
        /// The extensions whose names sort before `key` (all that are left when nil).
        func extras(before key: String?) {
            while nextExtra < extra.count, key.map({ extra[nextExtra].utf8.lexicographicallyPrecedes($0.utf8) }) ?? true {
                let key = extra[nextExtra]
                nextExtra += 1
                name(key)
                // A non-finite number has no JSON form: the whole body becomes "{}", as JSONWriter does.
                if !JSONWriter.write(extensions[key]!, into: &out) { writable = false }
            }
        }
        /// A standard member's name, made once as bytes (`"detail":`), after the extensions before it.
        func member(_ key: String, _ bytes: [UInt8]) {
            extras(before: key)
            if out.count > 1 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: bytes)
        }
        let texts = Self.codeTexts[code]!
        member("correlation_id", Self.memberNames.correlationId)
        JSONWriter.writeString(correlationId, into: &out)
        member("detail", Self.memberNames.detail)
        JSONWriter.writeString(detail, into: &out)
        member("error", Self.memberNames.error)
        out.append(contentsOf: texts.error)
        member("status", Self.memberNames.status)
        out.append(contentsOf: String(status).utf8)
        member("title", Self.memberNames.title)
        out.append(contentsOf: texts.title)
        member("type", Self.memberNames.type)
        out.append(contentsOf: texts.type)
        extras(before: nil)
        out.append(UInt8(ascii: "}"))
        return writable ? out : Array("{}".utf8)
    }

    private static let standardMembers: Set<String> = ["correlation_id", "detail", "error", "status", "title", "type"]

    /// The standard members' names as JSON bytes with their colon, made once.
    private static let memberNames = (
        correlationId: encodedName("correlation_id"), detail: encodedName("detail"), error: encodedName("error"),
        status: encodedName("status"), title: encodedName("title"), type: encodedName("type")
    )

    /// Each code's `error`, `title` and `type` values as JSON strings, made once.
    private static let codeTexts: [ProblemCode: (error: [UInt8], title: [UInt8], type: [UInt8])] = Dictionary(
        uniqueKeysWithValues: ProblemCode.allCases.map { code in (code, (encoded(code.rawValue), encoded(code.title), encoded(code.typeURI))) })

    private static func encoded(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        JSONWriter.writeString(text, into: &bytes)
        return bytes
    }

    private static func encodedName(_ name: String) -> [UInt8] { encoded(name) + [UInt8(ascii: ":")] }
}
