import IdentityCore
import TokenRelayBase
import TokenRelayStore

extension SilentAcquisition {
    /// What this replica's memory alone answers for `request`, on the server thread (behaviour §10):
    /// a cached token (``acquireFromMemory(_:)``), the problem of an account whose refresh token
    /// is dead, or an interaction-required answer the UI-required memory replays (ADR 0008).
    /// Nothing is written and nothing blocks; each answer is the one
    /// ``acquire(_:for:context:)`` gives for the same request.
    /// - Returns: the token, or nil when the database or the STS is needed.
    /// - Throws: `RelayError` `interaction_required` (dead account, replayed answer), 403
    ///   `tenant_suspended` (behaviour §12 Tenants).
    package func answerFromMemory(_ request: SilentTokenRequest) throws(RelayError) -> SilentTokenResult? {
        if let cached = acquireFromMemory(request) { return cached }
        guard case .accountId(let id) = request.account, let account = accounts.account(id: id) else { return nil }
        try suspensions.check(account)
        guard account.state == .active else { throw Self.deadRefreshToken(account, request: request) }
        // The rest of what `acquire(_:for:context:)` checks before the UI-required memory, when
        // it needs no I/O and cannot fail: an import not yet redeemed, another authority, claims
        // that do not merge, or an authority no longer accepted are left to it.
        guard account.homeAccountId != nil, request.authority == nil, (try? authorities.validate(account.authority)) != nil,
            let claims = try? mergedClaims(request.claims)
        else { return nil }
        let key = UIRequiredMemory.key(realm: account.realm, scopesKey: request.scopes.cacheKey, claims: claims)
        guard let replayed = uiRequired.recall(accountId: account.accountId, key: key, now: now()) else { return nil }
        metrics.increment("tokenrelay_ui_required_replayed_total")
        throw replayed
    }

    /// `interaction_required` for an account whose refresh token is no longer valid,
    /// with the sign-in hint its `sign_in_url` is minted from.
    package static func deadRefreshToken(_ account: AccountRecord, request: SilentTokenRequest) -> RelayError {
        var problem = RelayError(
            .interactionRequired, "The account's refresh token is no longer valid; the user must sign in again.",
            extensions: ["account_state": .string(account.state.rawValue), "account_id": .string(account.accountId)])
        problem.signInHint = SignInHint(account: account, scopes: request.scopes.canonical, claims: request.claims, authority: request.authority?.url)
        return problem
    }
}
