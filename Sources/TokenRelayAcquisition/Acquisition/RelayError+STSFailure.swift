import IdentityCore
import TokenRelayBase

extension RelayError {
    /// The problem for an STS answer the mapping table classified (behaviour §4, §12 Problems): STS
    /// details travel as `sts_error_codes`, the row's `field` when the caller's input was refused, `sts_trace_id`, `sts_correlation_id`; `suberror`
    /// verbatim and only when sent; `claims` as decoded JSON text; throttling with `Retry-After`.
    package init(_ failure: STSFailure, requestedScopes: ScopeSet? = nil) {
        var extensions: [String: JSONValue] = [:]
        if let field = failure.field { extensions["field"] = .string(field) }
        if !failure.stsErrorCodes.isEmpty {
            extensions["sts_error_codes"] = .array(failure.stsErrorCodes.map { .number(Double($0)) })
        }
        if let suberror = failure.suberror { extensions["suberror"] = .string(suberror) }
        if let claims = failure.claims { extensions["claims"] = .string(claims) }
        if let trace = failure.traceId { extensions["sts_trace_id"] = .string(trace) }
        if let correlation = failure.correlationId { extensions["sts_correlation_id"] = .string(correlation) }
        var retryAfter: Int?
        if let seconds = failure.retryAfterSeconds, failure.problem == .throttled || failure.problem == .upstreamUnavailable {
            retryAfter = seconds
            extensions["retry_after_s"] = .number(Double(seconds))
        }
        switch failure.disposition {
        case .refreshTokenDead:
            extensions["account_state"] = .string("interaction_required")
        case .interactionRequired:
            extensions["account_state"] = .string("active")
            if let requestedScopes, failure.suberror == "consent_required" || failure.error == "consent_required" || failure.stsErrorCodes.contains(65001) {
                extensions["scopes"] = .array(requestedScopes.canonical.map(JSONValue.string))
            }
        default:
            // Every STS answer says what became of the refresh token: here it was kept.
            extensions["account_state"] = .string("active")
        }
        self.init(failure.problem, failure.detail, status: failure.status, extensions: extensions)
        retryAfterSeconds = retryAfter
        stsFailure = failure
        replayable = failure.disposition == .interactionRequired
    }
}
