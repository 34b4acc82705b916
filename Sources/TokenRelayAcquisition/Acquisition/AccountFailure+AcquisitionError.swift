import IdentityCore
import TokenRelayBase
import TokenRelayStore

extension AccountFailure {
    /// What a failed redemption says about the account's health (behaviour §3.8), or nil when it
    /// says nothing about the account: TokenRelay's own limits (lease wait, concurrency, deadline),
    /// and a refusal of the caller's own input (`invalid_scope`, `invalid_authority`, e.g. a
    /// request naming another tenant, AADSTS7000012), which leaves the account as it was.
    package init?(_ error: AcquisitionError) {
        if let failure = error.failure ?? error.unavailable?.stsFailure {
            guard ![.invalidScope, .invalidAuthority, .invalidRequest].contains(failure.problem) else { return nil }
            self.init(failureClass: failure.failureClass, error: failure.error, stsErrorCodes: failure.stsErrorCodes, suberror: failure.suberror)
        } else if let problem = error.unavailable {
            // The platform unreachable (no answer to classify); anything else that stopped the
            // call is the service's own setup (a client credential that cannot be read).
            let transient = problem.code == .upstreamUnavailable || problem.code == .throttled
            self.init(failureClass: transient ? .transient : .configuration)
        } else {
            return nil
        }
    }
}
