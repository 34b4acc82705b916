import IdentityCore
import TokenRelayBase
import TokenRelayStore

extension SilentAcquisition {
    /// A cached token to serve, flagged, when the STS could not be used (behaviour §5 `ext_expires_on`,
    /// §12 Token requests `extended_lifetime: true`): only with `allow_extended_lifetime`, only
    /// when the refresh failed because the STS is unavailable (5xx, timeout, unreachable after
    /// the retries: `upstream_unavailable`), and only a token covering `scopes` that is no longer
    /// servable normally but still before its `ext_expires_on`. MSAL's "extended lifetime"
    /// (`ext_expires_in`, resilience while the token service is down).
    /// - Returns: the token with the latest `ext_expires_on`, or nil to answer the problem.
    package func extendedLifetimeToken(after error: AcquisitionError, account: AccountRecord, realm: String, scopes: ScopeSet) async throws
        -> StoredAccessToken?
    {
        guard allowExtendedLifetime, error.stsUnavailable else { return nil }
        let now = self.now()
        func extendable(_ token: StoredAccessToken) -> Bool {
            token.scopeSet.isSuperset(of: scopes)
                && TokenFreshness.evaluate(token.times, now: now, expirySkew: cache.expirySkewSeconds, minTTL: 0) == .extendedOnly
        }
        var candidates: [StoredAccessToken] = []
        if let inMemory = memory.lookup(accountId: account.accountId, environment: account.environment, realm: realm, scopes: scopes) {
            candidates.append(inMemory)
        }
        // The database may be what failed too: memory alone is enough then.
        if let stored = try? await store.accessTokens(accountId: account.accountId, environment: account.environment, realm: realm) {
            candidates += stored
        }
        guard let token = candidates.filter(extendable).max(by: { ($0.extExpiresOn ?? 0) < ($1.extExpiresOn ?? 0) }) else { return nil }
        metrics.increment("tokenrelay_token_cache_total", ["outcome": "extended_lifetime"])
        logger.warn("token.extended_lifetime", ["account.id": account.accountId, "token.expires_on": String(token.expiresOn)])
        return token
    }
}
