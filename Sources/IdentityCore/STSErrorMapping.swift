import Foundation

/// The STS-error → TokenRelay table (behaviour §4, §5; STYLE: "a table, one test per row"):
/// per row what to do with the refresh token and the account, the problem answered, and the
/// health class of the failure (behaviour §3.8: who can make it work again), with its source.
///
/// Sources: Microsoft identity platform "Microsoft Entra authentication and authorization
/// error codes" (AADSTS meanings); "Handle errors and exceptions in MSAL" and MSAL.NET's
/// `MsalUiRequiredException` classifications (suberrors basic_action, additional_action,
/// message_only, consent_required, user_password_expired); MSAL Python 1.10 (PR #321: an
/// `invalid_grant` for one resource must not evict the refresh token); MSAL.js PR #6757
/// (suberror `bad_token` removes the refresh token); Azure AD B2C "Error codes"; MSAL.NET
/// "retry policy" (retry 5xx once) and #3661; ADAL ObjC #321 (500 AADSTS90036 is
/// non-retryable).
///
/// Precedence in `classify`: HTTP 429 → `throttled`; the most specific known code; for 5xx,
/// the code decides only whether it is non-retryable, else `transient`; `invalid_client` →
/// credential rejected; then the suberror; then the OAuth `error`.
///
/// The most specific code is the last of `error_codes` that has a row: the platform writes the
/// family first and the reason after it ("AADSTS70002: Error validating credentials. AADSTS500133:
/// Assertion is not within its valid time range", error_codes [70002, 500133], azure-docs #16399,
/// cases/29; [70002, 50126] on the HDInsight troubleshooting page), so `error_codes[0]` would blame
/// the client secret for a caller's expired assertion. A `grantCode` row (a code that means the
/// grant itself when it comes with `invalid_grant`) wins over the `code` row of the same number.
/// `invalid_grant` with no code and no suberror means the grant itself is rejected
/// (refresh token dead); `invalid_grant` with an unknown code keeps the refresh token and
/// answers `interaction_required` (deleting a token on an unknown policy code would log
/// the user out of resources that still work: MSAL Python #314).
public enum STSErrorMapping {
    /// What a row matches.
    public enum Match: Sendable, Hashable, CustomStringConvertible {
        case code(STSErrorCode)
        /// A code that says something about the grant itself when it comes with `invalid_grant`,
        /// and something else with any other `error` (the `code` row of the same number).
        case grantCode(STSErrorCode)
        case suberror(String)
        case error(String)

        /// The code a `code` or `grantCode` row matches.
        public var code: STSErrorCode? {
            switch self {
            case .code(let code), .grantCode(let code): code
            case .suberror, .error: nil
            }
        }

        public var description: String {
            switch self {
            case .code(let code): "\(code)"
            case .grantCode(let code): "invalid_grant \(code)"
            case .suberror(let value): "suberror=\(value)"
            case .error(let value): "error=\(value)"
            }
        }
    }

    /// One row of the table.
    public struct Rule: Sendable, Hashable, CustomStringConvertible {
        public let match: Match
        public let disposition: STSFailure.Disposition
        /// The answer to `badRequest` rows: 400 `invalid_scope`, `invalid_authority` or
        /// `invalid_request` when the caller's input was refused, else 502 `upstream_error`.
        public let problem: ProblemCode
        /// The caller's request field a 400 names when the table knows it (`assertion`); nil for
        /// none, and for `invalid_scope` / `invalid_authority`, whose field the request's own
        /// members decide (`scopes` or `resource`, `authority` or `tenant_id`: `RelayError.nameInput`).
        public let field: String?
        /// Meaning, from the source.
        public let meaning: String
        /// Who can make it work again (an account's `health.last_failure.class`, behaviour §3.8).
        public let failureClass: FailureClass
        /// Where the row's meaning and class come from.
        public let source: Source

        public var description: String { "\(match) → \(disposition.rawValue)" }
    }

    /// The source of a row. Code rows cite the platform's reference unless a recorded answer
    /// (shared/cases) or a report decided them.
    public enum Source: Sendable, Hashable, CustomStringConvertible {
        /// "Microsoft Entra authentication and authorization error codes"
        /// (learn.microsoft.com/entra/identity-platform/reference-error-codes).
        case entraErrorCodes
        /// "Azure AD B2C error codes" (learn.microsoft.com/azure/active-directory-b2c/error-codes).
        case b2cErrorCodes
        /// "Handle errors and exceptions in MSAL" and MSAL.NET's `MsalUiRequiredException`
        /// classification (suberrors).
        case msalErrorHandling
        /// RFC 6749 §5.2 and OpenID Connect Core §3.1.2.6 (OAuth `error` values).
        case oauth
        /// A recorded answer of the platform: shared/cases/`id`.
        case recorded(String)
        /// A report with the platform's answer quoted (an issue or pull request).
        case report(String)

        public var description: String {
            switch self {
            case .entraErrorCodes: "Microsoft Entra authentication and authorization error codes"
            case .b2cErrorCodes: "Azure AD B2C error codes"
            case .msalErrorHandling: "Handle errors and exceptions in MSAL"
            case .oauth: "RFC 6749 §5.2; OpenID Connect Core §3.1.2.6"
            case .recorded(let id): "shared/cases/\(id)"
            case .report(let reference): reference
            }
        }

        static func of(_ match: Match) -> Source {
            switch match {
            case .code(.aadsts), .grantCode(.aadsts): .entraErrorCodes
            case .code(.aadb2c), .grantCode(.aadb2c): .b2cErrorCodes
            case .suberror: .msalErrorHandling
            case .error: .oauth
            }
        }
    }

    private static func row(
        _ match: Match, _ disposition: STSFailure.Disposition, _ meaning: String, problem: ProblemCode? = nil, field: String? = nil,
        class failureClass: FailureClass? = nil, source: Source? = nil
    ) -> Rule {
        Rule(
            match: match, disposition: disposition, problem: problem ?? defaultProblem(disposition), field: field, meaning: meaning,
            failureClass: failureClass ?? FailureClass(disposition), source: source ?? Source.of(match))
    }

    static func defaultProblem(_ disposition: STSFailure.Disposition) -> ProblemCode {
        switch disposition {
        case .refreshTokenDead, .interactionRequired: .interactionRequired
        case .userCanceled: .userCanceled
        case .clientCredentialRejected, .nonRetryableServer, .badRequest: .upstreamError
        case .throttled: .throttled
        case .transient: .upstreamUnavailable
        }
    }

    /// The table. Code rows first, then suberror rows, then OAuth `error` rows.
    public static let table: [Rule] = [
        // Refresh token dead: delete it, account → interaction_required.
        row(
            .code(.aadsts(700082)), .refreshTokenDead, "refresh token expired due to inactivity (90 days)",
            source: .recorded("01-aadsts700082-refresh-token-inactive-bad-token")),
        row(.code(.aadsts(70008)), .refreshTokenDead, "authorization code or refresh token expired or revoked"),
        row(.code(.aadsts(700081)), .refreshTokenDead, "refresh token reached its maximum lifetime"),
        row(.code(.aadsts(700084)), .refreshTokenDead, "refresh token issued to a SPA expired (24 h fixed lifetime)"),
        row(
            .code(.aadsts(50173)), .refreshTokenDead, "grant revoked (password changed or reset, sessions revoked)",
            source: .recorded("05-aadsts50173-grant-revoked-password-change")),
        row(.code(.aadsts(70043)), .refreshTokenDead, "refresh token expired by conditional access sign-in frequency"),
        row(.code(.aadsts(50089)), .refreshTokenDead, "flow token expired"),
        row(.code(.aadsts(50133)), .refreshTokenDead, "session invalid: expired or password recently changed"),
        row(.code(.aadsts(50132)), .refreshTokenDead, "session invalid: password expired or recently changed"),
        row(.code(.aadsts(70000)), .refreshTokenDead, "invalid grant: the refresh token is not valid"),
        row(.code(.aadsts(50057)), .refreshTokenDead, "user account is disabled", class: .adminAction),
        row(.code(.aadsts(50034)), .refreshTokenDead, "user account does not exist in the directory", class: .adminAction),
        row(.code(.aadb2c(90080)), .refreshTokenDead, "B2C: the provided grant has expired", source: .recorded("08-aadb2c90080-b2c-expired-grant")),
        row(.code(.aadb2c(90129)), .refreshTokenDead, "B2C: the provided grant has been revoked"),
        row(.code(.aadsts(50085)), .refreshTokenDead, "refresh token needs a new sign-in at the social identity provider"),
        // "Request is malformed" about the grant itself: a stored or imported refresh token that is
        // not one (truncated by a short column: azure-docs #63819, graph-docs #5846, cases/30) can
        // never be redeemed. With any other error it is our request that was malformed (`.code` row).
        row(
            .grantCode(.aadsts(9002313)), .refreshTokenDead, "the refresh token cannot be read (malformed, truncated, not a refresh token)",
            source: .recorded("30-imported-refresh-token-truncated-9002313")),
        // Policy for this resource: keep the refresh token.
        row(
            .code(.aadsts(50076)), .interactionRequired, "MFA required (configuration change or new location)",
            source: .recorded("02-aadsts50076-mfa-required-basic-action-keep-rt")),
        row(.code(.aadsts(50079)), .interactionRequired, "MFA registration required", source: .recorded("03-aadsts50079-interaction-required-with-claims")),
        row(.code(.aadsts(50074)), .interactionRequired, "strong authentication required"),
        row(.code(.aadsts(50072)), .interactionRequired, "MFA enrolment required"),
        row(.code(.aadsts(50078)), .interactionRequired, "presented MFA expired by policy"),
        row(.code(.aadsts(50158)), .interactionRequired, "external security challenge not satisfied"),
        row(
            .code(.aadsts(65001)), .interactionRequired, "consent required for the application and resource",
            source: .recorded("06-aadsts65001-consent-required")),
        row(.code(.aadsts(53000)), .interactionRequired, "conditional access: device not compliant"),
        row(.code(.aadsts(53001)), .interactionRequired, "conditional access: device not domain-joined"),
        row(.code(.aadsts(53002)), .interactionRequired, "conditional access: application not approved", class: .adminAction),
        row(.code(.aadsts(53003)), .interactionRequired, "blocked by conditional access", class: .adminAction),
        row(.code(.aadsts(53004)), .interactionRequired, "proof-up (MFA registration) required by policy"),
        row(.code(.aadsts(50055)), .interactionRequired, "password expired"),
        row(.code(.aadsts(50125)), .interactionRequired, "sign-in interrupted by password reset or registration"),
        row(.code(.aadsts(70044)), .interactionRequired, "session expired or invalid by conditional access"),
        row(.code(.aadsts(50058)), .interactionRequired, "silent sign-in requested but no user session"),
        row(.code(.aadsts(16000)), .interactionRequired, "user account does not exist in this tenant (guest)", class: .adminAction),
        row(.code(.aadsts(50105)), .interactionRequired, "user not assigned to a role for the application", class: .adminAction),
        row(.code(.aadsts(50097)), .interactionRequired, "device authentication required"),
        row(.code(.aadsts(50199)), .interactionRequired, "user confirmation required (CmsiInterrupt)"),
        row(.code(.aadsts(50005)), .interactionRequired, "conditional access: device platform not supported"),
        row(.code(.aadsts(50129)), .interactionRequired, "device not workplace-joined"),
        row(.code(.aadsts(50020)), .interactionRequired, "user from the identity provider does not exist in the tenant", class: .adminAction),
        row(.code(.aadsts(90072)), .interactionRequired, "external account must be added to the tenant first", class: .adminAction),
        row(.code(.aadsts(50053)), .interactionRequired, "account locked or sign-in blocked (too many attempts, malicious IP)"),
        row(.code(.aadsts(50140)), .interactionRequired, "keep-me-signed-in interrupt"),
        row(.code(.aadsts(50143)), .interactionRequired, "session mismatch: the user must choose the session"),
        row(.code(.aadb2c(90077)), .interactionRequired, "B2C: no existing session and prompt=none"),
        row(.code(.aadb2c(90118)), .interactionRequired, "B2C: user asked to reset the password"),
        // Another policy than the one that issued the grant: that policy needs a sign-in, the grant
        // stays good for its own (a request naming another policy must not kill the account).
        row(.code(.aadb2c(90088)), .interactionRequired, "B2C: the grant was not issued for this endpoint (another policy)"),
        // The user said no.
        row(.code(.aadsts(65004)), .userCanceled, "user declined consent"),
        row(.code(.aadb2c(90091)), .userCanceled, "B2C: user cancelled the flow"),
        // TokenRelay's own credential.
        row(
            .code(.aadsts(7000215)), .clientCredentialRejected, "invalid client secret (secret ID given, or wrong value)",
            source: .recorded("09-aadsts7000215-invalid-client-secret-401")),
        row(.code(.aadsts(7000222)), .clientCredentialRejected, "client secret expired"),
        row(.code(.aadsts(700016)), .clientCredentialRejected, "application not found in the directory"),
        row(.code(.aadsts(700027)), .clientCredentialRejected, "client assertion failed signature validation"),
        row(.code(.aadsts(700024)), .clientCredentialRejected, "client assertion not within its valid time range"),
        row(.code(.aadsts(7000218)), .clientCredentialRejected, "request body lacks client_assertion or client_secret"),
        row(.code(.aadsts(7000112)), .clientCredentialRejected, "application is disabled"),
        row(.code(.aadsts(70001)), .clientCredentialRejected, "application not found or disabled in the tenant"),
        row(.code(.aadsts(70002)), .clientCredentialRejected, "invalid client credentials"),
        row(.code(.aadsts(50012)), .clientCredentialRejected, "client authentication failed (assertion)"),
        row(.code(.aadb2c(90079)), .clientCredentialRejected, "B2C: the client must send a client_secret"),
        row(.code(.aadb2c(90081)), .clientCredentialRejected, "B2C: client_secret does not match"),
        // Requests the STS refuses.
        row(.code(.aadsts(70011)), .badRequest, "invalid scope", problem: .invalidScope),
        row(.code(.aadsts(28000)), .badRequest, "scopes of several resources in one request", problem: .invalidScope),
        row(.code(.aadsts(28003)), .badRequest, "empty scope", problem: .invalidScope),
        row(.code(.aadsts(500011)), .badRequest, "resource principal not found in the tenant", problem: .invalidScope),
        row(.code(.aadsts(65005)), .badRequest, "application misconfigured for the requested resource"),
        row(.code(.aadsts(900144)), .badRequest, "request body lacks a required parameter"),
        row(.code(.aadsts(9002313)), .badRequest, "malformed request"),
        row(.code(.aadsts(50001)), .badRequest, "resource disabled or not found", problem: .invalidScope),
        row(.code(.aadb2c(90012)), .badRequest, "B2C: scope not supported", problem: .invalidScope),
        row(.code(.aadb2c(90117)), .badRequest, "B2C: scope not supported by this policy", problem: .invalidScope),
        row(.code(.aadsts(90002)), .badRequest, "tenant not found", problem: .invalidAuthority),
        // The request named another tenant than the one that issued the refresh token; the token is
        // alive at its own (cases/33; sasl-xoauth2 #80): the caller's authority, not the account.
        row(
            .code(.aadsts(7000012)), .badRequest, "the grant was obtained for a different tenant", problem: .invalidAuthority,
            source: .recorded("33-aadsts7000012-refresh-token-for-a-different-tenant")),
        // The user assertion of an on-behalf-of grant (RFC 7523 §2.1) refused: the caller must send
        // a fresh token (cases/29). Only with invalid_grant: AADSTS50027 with invalid_request is our
        // own client assertion (the `.error` row, 502).
        row(
            .grantCode(.aadsts(500133)), .badRequest, "assertion is not within its valid time range", problem: .invalidRequest, field: "assertion",
            source: .recorded("29-obo-invalid-grant-two-error-codes")),
        row(.grantCode(.aadsts(50013)), .badRequest, "assertion is invalid (signature, audience, issuer)", problem: .invalidRequest, field: "assertion"),
        row(.grantCode(.aadsts(50027)), .badRequest, "assertion is not a valid JWT", problem: .invalidRequest, field: "assertion"),
        row(.code(.aadsts(54005)), .badRequest, "authorization code already redeemed"),
        row(.code(.aadsts(50011)), .badRequest, "redirect URI does not match the registration"),
        row(.code(.aadsts(65002)), .badRequest, "consent between first-party application and resource must be preauthorised"),
        row(.code(.aadsts(90014)), .badRequest, "a required field is missing"),
        row(.code(.aadb2c(90086)), .badRequest, "B2C: grant_type not supported"),
        // Server side.
        row(.code(.aadsts(90033)), .transient, "transient error, try again", source: .recorded("11-sts-503-temporarily-unavailable-90033")),
        row(.code(.aadsts(90036)), .nonRetryableServer, "unexpected non-retryable error", source: .report("ADAL ObjC #321")),
        row(.code(.aadb2c(90085)), .transient, "B2C: internal error, try again"),
        row(.code(.aadsts(50196)), .throttled, "client request loop detected"),
        // Suberrors (invalid_grant without a known code).
        row(.suberror("bad_token"), .refreshTokenDead, "the refresh token is invalid or expired"),
        row(.suberror("token_expired"), .refreshTokenDead, "the refresh token expired"),
        row(.suberror("basic_action"), .interactionRequired, "user can fix it in an interactive sign-in (e.g. MFA)"),
        row(.suberror("additional_action"), .interactionRequired, "user must do something more in an interactive sign-in"),
        row(.suberror("message_only"), .interactionRequired, "a message must be shown; the user cannot fix it alone", class: .adminAction),
        row(.suberror("consent_required"), .interactionRequired, "consent required"),
        row(.suberror("login_required"), .interactionRequired, "sign-in required"),
        row(.suberror("user_password_expired"), .interactionRequired, "password expired"),
        row(.suberror("protection_policy_required"), .interactionRequired, "app protection policy required"),
        row(.suberror("client_mismatch"), .interactionRequired, "refresh token belongs to another client of the family"),
        // OAuth errors (RFC 6749 §5.2, OpenID Connect Core §3.1.2.6).
        row(.error("interaction_required"), .interactionRequired, "interaction required"),
        row(.error("consent_required"), .interactionRequired, "consent required"),
        row(.error("login_required"), .interactionRequired, "sign-in required"),
        row(.error("access_denied"), .userCanceled, "resource owner denied the request"),
        row(.error("invalid_client"), .clientCredentialRejected, "client authentication failed"),
        row(.error("unauthorized_client"), .clientCredentialRejected, "client not authorised for this grant"),
        row(.error("temporarily_unavailable"), .transient, "server temporarily unavailable"),
        row(.error("server_error"), .transient, "server error"),
        row(.error("slow_down"), .throttled, "slow down"),
        row(.error("invalid_scope"), .badRequest, "invalid scope", problem: .invalidScope),
        row(.error("invalid_resource"), .badRequest, "invalid resource", problem: .invalidScope),
        row(.error("invalid_request"), .badRequest, "malformed request"),
        row(.error("unsupported_grant_type"), .badRequest, "unsupported grant type"),
        row(.error("invalid_grant"), .refreshTokenDead, "grant invalid, with no code or suberror naming a policy"),
    ]

    private static let byMatch: [Match: Rule] = Dictionary(table.map { ($0.match, $0) }, uniquingKeysWith: { first, _ in first })

    /// The rule for a match, if the table has one.
    public static func rule(for match: Match) -> Rule? { byMatch[match] }

    /// The row of the most specific code (see the type's doc): the last code that has a row,
    /// its `grantCode` row when `error` is `invalid_grant`. Nil when no code has a row.
    static func mostSpecificRule(codes: [STSErrorCode], error: String?) -> Rule? {
        for code in codes.reversed() {
            if error == "invalid_grant", let rule = byMatch[.grantCode(code)] { return rule }
            if let rule = byMatch[.code(code)] { return rule }
        }
        return nil
    }

    /// Classifies a failed token-endpoint response.
    /// - Parameters:
    ///   - status: HTTP status (≥ 400).
    ///   - headers: response headers (names case-insensitive; `Retry-After`,
    ///     `x-ms-request-id`, `client-request-id` are read).
    ///   - body: the body (JSON or anything else).
    ///   - now: current time, for an HTTP-date `Retry-After`.
    /// - Returns: the failure; never throws.
    public static func classify(status: Int, headers: [(String, String)], body: [UInt8], now: Date) -> STSFailure {
        let response = STSErrorResponse.parse(body)
        func header(_ name: String) -> String? {
            headers.first { $0.0.caseInsensitiveCompare(name) == .orderedSame }?.1
        }
        let retryAfter = RetryAfter.seconds(header("Retry-After"), now: now)
        let error = response.error?.lowercased()
        let codeRule = mostSpecificRule(codes: response.codes, error: error)

        var rule: Rule?
        var disposition: STSFailure.Disposition
        if status == 429 {
            disposition = .throttled
        } else if status >= 500 {
            let description = response.errorDescription?.lowercased() ?? ""
            let saysNonRetryable = ["non-retryable", "non-retriable", "nonretryable"].contains { description.contains($0) }
            disposition = codeRule?.disposition == .nonRetryableServer || saysNonRetryable ? .nonRetryableServer : .transient
            rule = disposition == .nonRetryableServer ? codeRule : nil
        } else if let codeRule {
            rule = codeRule
            disposition = codeRule.disposition
        } else if error == "invalid_client" {
            rule = byMatch[.error("invalid_client")]
            disposition = .clientCredentialRejected
        } else if let suberror = response.suberror?.lowercased(), let subRule = byMatch[.suberror(suberror)] {
            rule = subRule
            disposition = subRule.disposition
        } else if error == "invalid_grant", !response.codes.isEmpty {
            // An unknown code on invalid_grant: keep the token (see the type's doc).
            disposition = .interactionRequired
        } else if let error, let errorRule = byMatch[.error(error)] {
            rule = errorRule
            disposition = errorRule.disposition
        } else {
            disposition = .badRequest
        }

        let problem = rule?.problem ?? defaultProblem(disposition)
        let detail: String
        if let summary = response.summary {
            detail = summary
        } else if let error = response.error {
            detail = "The identity provider answered HTTP \(status) \(error)."
        } else {
            detail = "The identity provider answered HTTP \(status)."
        }
        return STSFailure(
            disposition: disposition,
            problem: problem,
            status: problem.status,
            field: rule?.field,
            error: response.error,
            suberror: response.suberror,
            stsErrorCodes: response.errorCodes,
            mostSpecificCode: codeRule?.match.code?.number,
            failureClass: rule?.failureClass ?? FailureClass(disposition),
            claims: response.claims,
            traceId: response.traceId ?? header("x-ms-request-id"),
            correlationId: response.correlationId ?? header("client-request-id"),
            retryAfterSeconds: retryAfter,
            detail: detail)
    }
}
