import IdentityCore
import TokenRelayBase
import TokenRelayUpstream

/// Why a token acquisition produced no token, as the acquisition code decides on it (in the
/// style of postgres-nio's `PSQLError`: a struct over a code, with the details beside it). It
/// is rendered as a problem once, at the edge, by ``RelayError/init(_:requestedScopes:)``; nothing
/// reads a rendered problem to decide what to do.
package struct AcquisitionError: Error, Sendable, CustomStringConvertible {
    package enum Code: String, Sendable, CaseIterable {
        /// The STS answered an error the mapping table classified (``failure``).
        case stsRejected = "sts_rejected"
        /// No usable STS answer: network failure, timeout, retries spent (``unavailable``).
        case stsUnavailable = "sts_unavailable"
        /// The account has no refresh token: the user must sign in.
        case noRefreshToken = "no_refresh_token"
        /// Another redemption of the account's refresh token held its lease past the deadline.
        case leaseWaitTimeout = "lease_wait_timeout"
        /// The deadline passed before the STS was asked.
        case deadlinePassed = "deadline_passed"
        /// This replica's redemptions in flight stayed at `TOKENRELAY_MAX_CONCURRENT_REFRESHES`
        /// until the deadline.
        case concurrencyLimit = "concurrency_limit"
        /// The refresh engine met an event it cannot be in (a bug).
        case unexpected
    }

    package let code: Code
    /// The classified STS answer (``Code/stsRejected``).
    package var failure: STSFailure?
    /// The answer the STS client already made (``Code/stsUnavailable``: its Retry-After, its STS codes).
    package var unavailable: RelayError?

    package init(code: Code, failure: STSFailure? = nil, unavailable: RelayError? = nil) {
        self.code = code
        self.failure = failure
        self.unavailable = unavailable
    }

    package static func rejected(_ failure: STSFailure) -> Self { Self(code: .stsRejected, failure: failure) }
    package static func unavailable(_ problem: RelayError) -> Self { Self(code: .stsUnavailable, unavailable: problem) }
    package static let noRefreshToken = Self(code: .noRefreshToken)
    package static let leaseWaitTimeout = Self(code: .leaseWaitTimeout)
    package static let deadlinePassed = Self(code: .deadlinePassed)
    package static let concurrencyLimit = Self(code: .concurrencyLimit)
    package static let unexpected = Self(code: .unexpected)

    /// The STS said the refresh token itself is dead: the account is in `interaction_required`.
    package var refreshTokenDied: Bool { failure?.disposition == .refreshTokenDead }

    /// The STS could not be used (5xx, timeout, unreachable after the retries): what behaviour §5's
    /// extended lifetime covers. TokenRelay's own limits (lease wait, concurrency) are not.
    package var stsUnavailable: Bool {
        switch code {
        case .stsUnavailable: true
        case .stsRejected: failure?.problem == .upstreamUnavailable
        default: false
        }
    }

    /// `tokenrelay_refresh_total{outcome}` for a refresh that ended with this error.
    package var refreshOutcome: String {
        switch code {
        case .stsRejected:
            switch failure?.disposition {
            case .refreshTokenDead?, .interactionRequired?, .userCanceled?: "interaction_required"
            case .throttled?: "throttled"
            default: "upstream_error"
            }
        case .noRefreshToken: "interaction_required"
        case .stsUnavailable, .unexpected: "upstream_error"
        case .leaseWaitTimeout, .deadlinePassed: "lease_wait_timeout"
        case .concurrencyLimit: "concurrency_limit"
        }
    }

    /// Safe to log: the code and the STS's error codes, never a token.
    package var description: String {
        var text = "AcquisitionError(\(code.rawValue)"
        if let failure { text += ", sts: \(failure.disposition.rawValue) \(failure.stsErrorCodes)" }
        return text + ")"
    }
}

extension RelayError {
    /// The one mapping of an acquisition error to the caller's problem (behaviour §4, §12), row by row:
    ///
    /// | code | problem |
    /// |---|---|
    /// | `sts_rejected` | the STS-error table's problem (`RelayError(_: STSFailure)`) |
    /// | `sts_unavailable` | the STS client's 503/504 `upstream_unavailable` as made |
    /// | `no_refresh_token` | 409 `interaction_required`, `account_state: active` |
    /// | `lease_wait_timeout` | 503 `upstream_unavailable`, `Retry-After: 1` |
    /// | `deadline_passed` | 504 `upstream_unavailable`, `Retry-After: 1` |
    /// | `concurrency_limit` | 503 `upstream_unavailable`, `Retry-After: 1` |
    /// | `unexpected` | 500 `internal` |
    package init(_ error: AcquisitionError, requestedScopes: ScopeSet? = nil) {
        switch error.code {
        case .stsRejected:
            if let failure = error.failure {
                self.init(failure, requestedScopes: requestedScopes)
            } else {
                self.init(.internal, "The identity provider's answer was lost.")
            }
        case .stsUnavailable:
            self = error.unavailable ?? RelayError.unavailable("The identity provider could not be reached.", retryAfterSeconds: 1)
        case .noRefreshToken:
            self.init(
                .interactionRequired, "No refresh token is stored for this account; the user must sign in.",
                extensions: ["account_state": .string("active")])
        case .leaseWaitTimeout:
            self = RelayError.unavailable(
                "Another redemption of this account's refresh token was still running at the request deadline.", retryAfterSeconds: 1)
        case .deadlinePassed:
            self = RelayError.deadlinePassed(before: "sts")
        case .concurrencyLimit:
            self = RelayError.unavailable("Too many refresh-token redemptions are in flight on this replica.", retryAfterSeconds: 1)
        case .unexpected:
            self.init(.internal, "The refresh could not be completed.")
            cause = error.description
        }
    }
}
