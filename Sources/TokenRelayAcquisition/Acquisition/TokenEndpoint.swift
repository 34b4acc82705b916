import IdentityCore
import TokenRelayBase
import TokenRelayUpstream

/// The STS's token endpoint as the refresh engine needs it: one refresh-token redemption under
/// the retry policy (behaviour §5). `STSClient` is the live form.
package protocol TokenEndpoint: Sendable {
    /// Redeems `refreshToken` (`grant_type=refresh_token`, RFC 6749 §6) at `authority`.
    /// - Parameter account: the account id, for the throttle memory.
    /// - Returns: the tokens, or why there are none (never thrown).
    func redeem(
        refreshToken: String, authority: Authority, scopes: ScopeSet, claims: String?, context: RequestContext, account: String
    ) async -> Result<TokenResponse, STSCallError>
}

extension STSClient: TokenEndpoint {
    package func redeem(
        refreshToken: String, authority: Authority, scopes: ScopeSet, claims: String?, context: RequestContext, account: String
    ) async -> Result<TokenResponse, STSCallError> {
        do {
            return .success(
                try await redeem(
                    grant: [("grant_type", "refresh_token"), ("refresh_token", refreshToken)], authority: authority, scopes: scopes,
                    claims: claims, context: context, account: account))
        } catch {
            return .failure(error)
        }
    }
}
