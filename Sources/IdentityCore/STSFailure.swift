/// What a failed token-endpoint response means for TokenRelay: what to do with the refresh
/// token and the account, and which problem to answer (behaviour §4.3, §4, §5).
public struct STSFailure: Sendable, Equatable {
    /// The action class of an STS error.
    public enum Disposition: String, Sendable, Equatable, CaseIterable {
        /// The refresh token itself is dead (expired, revoked, idle too long): delete it
        /// durably, put the account in `interaction_required` for every scope.
        case refreshTokenDead = "refresh_token_dead"
        /// A policy for this resource (MFA, consent, conditional access): keep the refresh
        /// token (other resources still work); remember the answer briefly (UI-required memory).
        case interactionRequired = "interaction_required"
        /// The user declined at the authority (`access_denied`, AADSTS65004, AADB2C90091).
        case userCanceled = "user_canceled"
        /// The STS rejected TokenRelay's own client credential: 502, touches no account,
        /// readiness warns (behaviour §12).
        case clientCredentialRejected = "client_credential_rejected"
        /// 429: honour Retry-After, fill the throttle memory, keep the refresh token.
        case throttled
        /// 5xx / `temporarily_unavailable`: retry once, then 503; keep the refresh token.
        case transient
        /// A 5xx whose body names a non-retryable error (AADSTS90036): no retry, 502.
        case nonRetryableServer = "non_retryable_server"
        /// The STS refused the request itself. A scope or resource the STS does not know, a
        /// tenant that did not issue the grant, an on-behalf-of assertion refused, are the
        /// caller's input: 400 `invalid_scope`, `invalid_authority`, `invalid_request` (on
        /// `assertion`, ``STSFailure/field``). Anything else (malformed request, unsupported grant) is
        /// TokenRelay's fault: 502 `upstream_error`.
        case badRequest = "bad_request"
    }

    public let disposition: Disposition
    public let problem: ProblemCode
    /// HTTP status TokenRelay answers (the problem's status).
    public let status: Int
    /// The caller's request field a 400 names when the table row knows it (`assertion`).
    public let field: String?
    /// The STS's OAuth `error` (nil for a non-JSON body).
    public let error: String?
    /// The STS's `suberror`, verbatim; nil when it sent none.
    public let suberror: String?
    /// `AADSTS` / `AADB2C` numbers, in the answer's order.
    public let stsErrorCodes: [Int]
    /// The code the answer was classified by: the most specific one that has a row of the table,
    /// else the last; nil without codes (``STSErrorMapping``: never `error_codes[0]`).
    public let mostSpecificCode: Int?
    /// Who can make it work again (an account's `health.last_failure.class`, behaviour §3.8).
    public let failureClass: FailureClass
    /// The claims challenge as JSON text.
    public let claims: String?
    public let traceId: String?
    public let correlationId: String?
    /// From `Retry-After`, whole seconds rounded up.
    public let retryAfterSeconds: Int?
    /// Safe summary: the code and the first sentence of the description; never a token.
    public let detail: String

    public init(
        disposition: Disposition, problem: ProblemCode, status: Int? = nil, field: String? = nil, error: String? = nil, suberror: String? = nil,
        stsErrorCodes: [Int] = [], mostSpecificCode: Int? = nil, failureClass: FailureClass? = nil, claims: String? = nil, traceId: String? = nil,
        correlationId: String? = nil,
        retryAfterSeconds: Int? = nil, detail: String
    ) {
        self.disposition = disposition
        self.problem = problem
        self.status = status ?? problem.status
        self.field = field
        self.error = error
        self.suberror = suberror
        self.stsErrorCodes = stsErrorCodes
        self.mostSpecificCode = mostSpecificCode ?? stsErrorCodes.last
        self.failureClass = failureClass ?? FailureClass(disposition)
        self.claims = claims
        self.traceId = traceId
        self.correlationId = correlationId
        self.retryAfterSeconds = retryAfterSeconds
        self.detail = detail
    }

    /// True when the stored refresh token must be deleted.
    public var refreshTokenIsDead: Bool { disposition == .refreshTokenDead }
    /// True when retrying the same request may succeed.
    public var isRetryable: Bool { disposition == .transient || disposition == .throttled }
}
