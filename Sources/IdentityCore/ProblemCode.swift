/// TokenRelay's stable machine error codes and their HTTP statuses (behaviour §4, §12 "Problems").
public enum ProblemCode: String, Sendable, CaseIterable {
    case invalidRequest = "invalid_request"
    case invalidScope = "invalid_scope"
    case invalidAuthority = "invalid_authority"
    case unauthenticated
    case forbidden
    /// The account's tenant (or the app/on-behalf-of token's) is suspended by an operator (behaviour §12 Tenants).
    case tenantSuspended = "tenant_suspended"
    case accountNotFound = "account_not_found"
    case notFound = "not_found"
    case methodNotAllowed = "method_not_allowed"
    case interactionRequired = "interaction_required"
    case userCanceled = "user_canceled"
    /// A sign-in for one account was completed by another user (behaviour §3.8).
    case userMismatch = "user_mismatch"
    case ambiguousAccount = "ambiguous_account"
    /// The request conflicts with what is stored (an `external_id` another account holds).
    case conflict
    case serverDeclinedScopes = "server_declined_scopes"
    case throttled
    case rateLimited = "rate_limited"
    case payloadTooLarge = "payload_too_large"
    case uriTooLong = "uri_too_long"
    case headerFieldsTooLarge = "header_fields_too_large"
    case unsupportedMediaType = "unsupported_media_type"
    /// `Expect` holds an expectation other than `100-continue` (RFC 9110 §10.1.1).
    case expectationFailed = "expectation_failed"
    /// A transfer coding other than `chunked` (RFC 9112 §6.1).
    case notImplemented = "not_implemented"
    case upstreamError = "upstream_error"
    case upstreamUnavailable = "upstream_unavailable"
    case `internal`

    /// The HTTP status (behaviour §4). `upstream_unavailable` is 503 here; a timeout may answer 504.
    public var status: Int {
        switch self {
        case .invalidRequest, .invalidScope, .invalidAuthority, .userCanceled: 400
        case .unauthenticated: 401
        case .forbidden, .tenantSuspended: 403
        case .accountNotFound, .notFound: 404
        case .methodNotAllowed: 405
        case .interactionRequired, .userMismatch, .ambiguousAccount, .conflict, .serverDeclinedScopes: 409
        case .payloadTooLarge: 413
        case .uriTooLong: 414
        case .headerFieldsTooLarge: 431
        case .unsupportedMediaType: 415
        case .expectationFailed: 417
        case .notImplemented: 501
        case .throttled, .rateLimited: 429
        case .internal: 500
        case .upstreamError: 502
        case .upstreamUnavailable: 503
        }
    }

    /// A short human title (RFC 9457 §3.1.3).
    public var title: String {
        switch self {
        case .invalidRequest: "Invalid request"
        case .invalidScope: "Invalid scope"
        case .invalidAuthority: "Invalid authority"
        case .unauthenticated: "Unauthenticated"
        case .forbidden: "Forbidden"
        case .tenantSuspended: "Tenant suspended"
        case .accountNotFound: "Account not found"
        case .notFound: "Not found"
        case .methodNotAllowed: "Method not allowed"
        case .interactionRequired: "Interaction required"
        case .userCanceled: "User canceled"
        case .userMismatch: "User mismatch"
        case .ambiguousAccount: "Ambiguous account"
        case .conflict: "Conflict"
        case .serverDeclinedScopes: "Server declined scopes"
        case .throttled: "Throttled"
        case .rateLimited: "Rate limited"
        case .payloadTooLarge: "Payload too large"
        case .uriTooLong: "URI too long"
        case .headerFieldsTooLarge: "Request header fields too large"
        case .unsupportedMediaType: "Unsupported media type"
        case .expectationFailed: "Expectation failed"
        case .notImplemented: "Not implemented"
        case .upstreamError: "Upstream error"
        case .upstreamUnavailable: "Upstream unavailable"
        case .internal: "Internal error"
        }
    }

    /// `urn:tokenrelay:problem:{error}` (behaviour §12).
    public var typeURI: String { "urn:tokenrelay:problem:\(rawValue)" }
}
