import IdentityCore

/// Why a request was refused or could not be answered, as the layers below HTTP decide it: a
/// struct over TokenRelay's stable code (``ProblemCode``, behaviour §4) with the facts beside it,
/// in the shape of postgres-nio's `PSQLError`. It names no HTTP type: the HTTP layer renders it
/// once, as the RFC 9457 problem a caller sees (`TokenRelayHTTP`, `RelayError+ProblemJSON.swift`).
///
/// The facts a caller sees travel in ``extensions`` (`field`, `suberror`, `sts_error_codes`,
/// `retry_after_s`, ...); ``retryAfterSeconds``, ``challenge`` and ``allowedMethods`` become the
/// answer's `Retry-After`, `WWW-Authenticate` and `Allow` headers, ``closesConnection`` its `Connection: close`.
package struct RelayError: Error, Sendable {
    package var code: ProblemCode
    package var detail: String
    /// The answer's status: the code's own (``ProblemCode/status``) unless a row of behaviour §4
    /// says otherwise (504 for a deadline the STS did not meet, an STS answer's own 4xx).
    package var status: Int
    package var extensions: [String: JSONValue]
    /// Seconds the caller should wait before trying again (`Retry-After`, RFC 9110 §10.2.3).
    package var retryAfterSeconds: Int?
    /// A downstream API's challenge relayed as it came (`WWW-Authenticate`, RFC 9110 §11.6.1).
    package var challenge: String?
    /// The methods a path takes (`Allow` of a 405, RFC 9110 §10.2.1).
    package var allowedMethods: [String]?
    /// The request's framing cannot be trusted: the answer closes the connection
    /// (`Connection: close`, RFC 9112 §9.6).
    package var closesConnection = false
    /// What went wrong underneath, for the log only; never rendered to the caller.
    package var cause: String?
    /// The identity platform's classified answer this problem was made from (an account's
    /// health records it, behaviour §3.8); never rendered as such.
    package var stsFailure: STSFailure?
    /// The correlation id that names this answer when a step learned one the pipeline could not
    /// (the body's `correlation_id`, behaviour §12).
    package var correlationId: String?
    /// Who should sign in again, and for what: the HTTP layer mints the problem's `sign_in_url`
    /// from it when it renders the answer (behaviour §12: freshly minted on every answer, replays too).
    package var signInHint: SignInHint?
    /// Where a person's browser may go back to after a failed sign-in: the sign-in's
    /// `redirect_after` with `error` added (the HTTP layer's browser page); never in the
    /// problem+json body.
    package var returnTo: String?
    /// Set for the STS's policy answers (MFA, consent, conditional access) that the UI-required
    /// memory may replay (behaviour §5); never for TokenRelay's own refusals.
    package var replayable = false

    package init(_ code: ProblemCode, _ detail: String, status: Int? = nil, extensions: [String: JSONValue] = [:]) {
        self.code = code
        self.detail = detail
        self.status = status ?? code.status
        self.extensions = extensions
    }

    /// 400 `invalid_request` naming the offending field.
    package static func invalidRequest(field: String, _ detail: String) -> RelayError {
        RelayError(.invalidRequest, detail, extensions: ["field": .string(field)])
    }

    package static func accountNotFound() -> RelayError {
        RelayError(.accountNotFound, "No account matches the given identifier.")
    }

    /// 503 `upstream_unavailable` with `Retry-After` (behaviour §12: always carried).
    package static func unavailable(_ detail: String, retryAfterSeconds: Int) -> RelayError {
        var error = RelayError(.upstreamUnavailable, detail, extensions: ["retry_after_s": .number(Double(retryAfterSeconds))])
        error.retryAfterSeconds = retryAfterSeconds
        return error
    }

    /// 429 `throttled` with `Retry-After` and `retry_after_s` (behaviour §4, §12: always carried).
    package static func throttled(_ detail: String, retryAfterSeconds: Int) -> RelayError {
        var error = RelayError(.throttled, detail, extensions: ["retry_after_s": .number(Double(retryAfterSeconds))])
        error.retryAfterSeconds = retryAfterSeconds
        return error
    }
}
