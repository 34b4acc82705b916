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
        var headers = self.headers
        headers.set("Content-Type", "application/problem+json")
        return HTTPResponse(status: status, headers: headers, body: body(correlationId: correlationId))
    }

    /// The RFC 9457 members, in UTF-8 key order as ``JSONWriter`` writes every object, and the
    /// extensions merged in: written straight into bytes rather than through a `[String:
    /// JSONValue]` (hashing and sorting the six standard members was a fifth of a 401's cost,
    /// behaviour §10). The standard members win over an extension of the same name.
    func body(correlationId: String) -> [UInt8] {
        let standard: [(key: String, value: JSONValue)] = [
            ("correlation_id", .string(correlationId)), ("detail", .string(detail)), ("error", .string(code.rawValue)),
            ("status", .number(Double(status))), ("title", .string(code.title)), ("type", .string(code.typeURI)),
        ]
        let extra = JSONWriter.sortedKeys(extensions).filter { key in !Self.standardMembers.contains(key) }
        var out: [UInt8] = []
        out.reserveCapacity(320)
        out.append(UInt8(ascii: "{"))
        var nextStandard = 0
        var nextExtra = 0
        while nextStandard < standard.count || nextExtra < extra.count {
            let key: String
            let value: JSONValue
            if nextExtra == extra.count
                || (nextStandard < standard.count && standard[nextStandard].key.utf8.lexicographicallyPrecedes(extra[nextExtra].utf8))
            {
                (key, value) = standard[nextStandard]
                nextStandard += 1
            } else {
                key = extra[nextExtra]
                value = extensions[key]!
                nextExtra += 1
            }
            if out.count > 1 { out.append(UInt8(ascii: ",")) }
            JSONWriter.writeString(key, into: &out)
            out.append(UInt8(ascii: ":"))
            // A non-finite number has no JSON form: the whole body becomes "{}", as JSONWriter does.
            guard JSONWriter.write(value, into: &out) else { return Array("{}".utf8) }
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    private static let standardMembers: Set<String> = ["correlation_id", "detail", "error", "status", "title", "type"]
}
