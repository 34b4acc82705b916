/// Who can make a failed refresh work again: the health class of an account's last failure
/// (behaviour §3.8), a column of the STS-error table (``STSErrorMapping/Rule/failureClass``).
public enum FailureClass: String, Sendable, Hashable, CaseIterable {
    /// Nobody: the platform was unavailable or asked to wait; the next try may work.
    case transient
    /// The user, in an interactive sign-in: MFA, consent, a new password, signing in again.
    case userAction = "user_action"
    /// An administrator of the user's tenant: a disabled or deleted user, a Conditional Access
    /// block, an assignment or invitation missing. Signing in again alone does not help.
    case adminAction = "admin_action"
    /// The service's operator: the client credential, the app registration, an authority or
    /// scope the request named.
    case configuration

    /// The class of a disposition when no row says otherwise.
    public init(_ disposition: STSFailure.Disposition) {
        switch disposition {
        case .refreshTokenDead, .interactionRequired, .userCanceled: self = .userAction
        case .clientCredentialRejected, .badRequest: self = .configuration
        case .transient, .throttled, .nonRetryableServer: self = .transient
        }
    }
}
