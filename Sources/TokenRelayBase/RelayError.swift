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
    package var code: ProblemCode {
        get { box.values.code }
        set { change { $0.code = newValue } }
    }
    package var detail: String {
        get { box.values.detail }
        set { change { $0.detail = newValue } }
    }
    /// The answer's status: the code's own (``ProblemCode/status``) unless a row of behaviour §4
    /// says otherwise (504 for a deadline the STS did not meet, an STS answer's own 4xx).
    package var status: Int {
        get { box.values.status }
        set { change { $0.status = newValue } }
    }
    package var extensions: [String: JSONValue] {
        get { box.values.extensions }
        set { change { $0.extensions = newValue } }
    }
    /// Seconds the caller should wait before trying again (`Retry-After`, RFC 9110 §10.2.3).
    package var retryAfterSeconds: Int? {
        get { box.values.retryAfterSeconds }
        set { change { $0.retryAfterSeconds = newValue } }
    }
    /// A downstream API's challenge relayed as it came (`WWW-Authenticate`, RFC 9110 §11.6.1).
    package var challenge: String? {
        get { box.values.challenge }
        set { change { $0.challenge = newValue } }
    }
    /// The methods a path takes (`Allow` of a 405, RFC 9110 §10.2.1).
    package var allowedMethods: [String]? {
        get { box.values.allowedMethods }
        set { change { $0.allowedMethods = newValue } }
    }
    /// The request's framing cannot be trusted: the answer closes the connection
    /// (`Connection: close`, RFC 9112 §9.6).
    package var closesConnection: Bool {
        get { box.values.closesConnection }
        set { change { $0.closesConnection = newValue } }
    }
    /// What went wrong underneath, for the log only; never rendered to the caller.
    package var cause: String? {
        get { box.values.cause }
        set { change { $0.cause = newValue } }
    }
    /// The identity platform's classified answer this problem was made from (an account's
    /// health records it, behaviour §3.8); never rendered as such.
    package var stsFailure: STSFailure? {
        get { box.values.stsFailure }
        set { change { $0.stsFailure = newValue } }
    }
    /// The correlation id that names this answer when a step learned one the pipeline could not
    /// (the body's `correlation_id`, behaviour §12).
    package var correlationId: String? {
        get { box.values.correlationId }
        set { change { $0.correlationId = newValue } }
    }
    /// Who should sign in again, and for what: the HTTP layer mints the problem's `sign_in_url`
    /// from it when it renders the answer (behaviour §12: freshly minted on every answer, replays too).
    package var signInHint: SignInHint? {
        get { box.values.signInHint }
        set { change { $0.signInHint = newValue } }
    }
    /// Where a person's browser may go back to after a failed sign-in: the sign-in's
    /// `redirect_after` with `error` added (the HTTP layer's browser page); never in the
    /// problem+json body.
    package var returnTo: String? {
        get { box.values.returnTo }
        set { change { $0.returnTo = newValue } }
    }
    /// Set for the STS's policy answers (MFA, consent, conditional access) that the UI-required
    /// memory may replay (behaviour §5); never for TokenRelay's own refusals.
    package var replayable: Bool {
        get { box.values.replayable }
        set { change { $0.replayable = newValue } }
    }

    // The facts live in one immutable object shared by every copy (a change makes a new one):
    // an error rides in optionals and enum payloads of values copied on every request, such as
    // the silent plan (behaviour §10), where thirteen inline fields cost a copy of about 250 bytes.
    private var box: Box

    private struct Values: Sendable {
        var code: ProblemCode
        var detail: String
        var status: Int
        var extensions: [String: JSONValue]
        var retryAfterSeconds: Int?
        var challenge: String?
        var allowedMethods: [String]?
        var cause: String?
        var stsFailure: STSFailure?
        var correlationId: String?
        var signInHint: SignInHint?
        var returnTo: String?
        var closesConnection = false
        var replayable = false
    }

    private final class Box: Sendable {
        let values: Values
        init(_ values: Values) { self.values = values }
    }

    private mutating func change(_ apply: (inout Values) -> Void) {
        var values = box.values
        apply(&values)
        box = Box(values)
    }

    package init(_ code: ProblemCode, _ detail: String, status: Int? = nil, extensions: [String: JSONValue] = [:]) {
        box = Box(Values(code: code, detail: detail, status: status ?? code.status, extensions: extensions))
    }

    /// 400 `invalid_request` naming the offending field.
    package static func invalidRequest(field: String, _ detail: String) -> RelayError {
        RelayError(.invalidRequest, detail, extensions: ["field": .string(field)])
    }

    /// - Parameter field: the member, parameter or header that named the account, when known here
    ///   (a path's `account_id`); else the caller names it (behaviour §4.1).
    package static func accountNotFound(field: String? = nil) -> RelayError {
        RelayError(.accountNotFound, "No account matches the given identifier.", extensions: field.map { ["field": .string($0)] } ?? [:])
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

extension RelayError: CustomStringConvertible {
    /// For logs (a cause wrapping another error): the code, status, detail and cause; never the
    /// sign-in hint or extensions, which may name a user.
    package var description: String {
        "RelayError(\(code.rawValue), \(status): \(detail)" + (cause.map { "; cause: \($0)" } ?? "") + ")"
    }
}
