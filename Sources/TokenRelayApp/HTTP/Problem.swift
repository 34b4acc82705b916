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
        var members = extensions
        members["type"] = .string(code.typeURI)
        members["title"] = .string(code.title)
        members["status"] = .number(Double(status))
        members["detail"] = .string(detail)
        members["error"] = .string(code.rawValue)
        members["correlation_id"] = .string(correlationId)
        var headers = self.headers
        headers.set("Content-Type", "application/problem+json")
        return HTTPResponse(status: status, headers: headers, body: JSONWriter.encode(.object(members)))
    }
}
