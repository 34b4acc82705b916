import IdentityCore
import TokenRelayBase
import TokenRelayStore

/// Reads the access-token cache (behaviour §1, §2 step 2, §12 Token requests): this replica's memory
/// first, then the encrypted persistent cache, whose hits are brought back into memory.
package struct TokenCacheReader: Sendable {
    package let store: any RefreshTokenStore
    package let memory: MemoryTokenCache
    /// A token this close to `expires_on` (seconds) is not served (`TOKENRELAY_EXPIRY_SKEW_S`).
    package let expirySkewSeconds: Int
    package let metrics: Metrics
    package let now: @Sendable () -> Int

    package init(store: any RefreshTokenStore, memory: MemoryTokenCache, expirySkewSeconds: Int, metrics: Metrics, now: @escaping @Sendable () -> Int) {
        self.store = store
        self.memory = memory
        self.expirySkewSeconds = expirySkewSeconds
        self.metrics = metrics
        self.now = now
    }

    /// Where a hit was found (the `layer` label of `tokenrelay_token_cache_total`).
    package enum Layer: String, Sendable {
        case memory
        case database
    }

    /// A servable token from memory alone, or nil.
    package func fromMemory(accountId: String, environment: String, realm: String, scopes: ScopeSet, minTTL: Int) -> StoredAccessToken? {
        memoryHit(accountId: accountId, environment: environment, realm: realm, scopes: scopes, minTTL: minTTL)?.token
    }

    /// A servable token from memory alone with its prebuilt answer, or nil.
    /// - Parameter now: Unix seconds the token must be servable at; nil reads the clock (a plan
    ///   passes the time it read once, behaviour §10).
    package func memoryHit(accountId: String, environment: String, realm: String, scopes: ScopeSet, minTTL: Int, now: Int? = nil) -> MemoryTokenCache.Hit? {
        guard let hit = memory.hit(accountId: accountId, environment: environment, realm: realm, scopes: scopes),
            hit.token.isServable(now: now ?? self.now(), expirySkew: expirySkewSeconds, minTTL: minTTL)
        else { return nil }
        return hit
    }

    /// A servable token covering `scopes` from the database, brought into memory, or nil (a
    /// miss, counted). Memory was asked first (``memoryHit(accountId:environment:realm:scopes:minTTL:)``).
    /// - Parameter read: the account's stored tokens in its own environment and realm when they
    ///   were read with the account (``AccountResolver/byAccountId(_:owner:readingTokens:)``):
    ///   used instead of a second read; nil reads the database.
    /// - Throws: `RelayError` 503 when the database is unreachable.
    package func lookUpStored(
        account: AccountRecord, realm: String, scopes: ScopeSet, minTTL: Int, read: [StoredAccessToken]? = nil
    ) async throws -> StoredAccessToken? {
        let stored =
            if let read { read } else {
                try await store.accessTokens(accountId: account.accountId, environment: account.environment, realm: realm)
            }
        if let hit = stored.best(covering: scopes, now: now(), expirySkew: expirySkewSeconds, minTTL: minTTL) {
            memory.store(hit, now: now())
            return hit
        }
        metrics.increment("tokenrelay_token_cache_total", ["outcome": "miss"])
        return nil
    }

    /// Served iff `expires_on − now ≥ max(expiry_skew, min_ttl)` (behaviour §12).
    package func usable(_ token: StoredAccessToken, minTTL: Int) -> Bool {
        token.isServable(now: now(), expirySkew: expirySkewSeconds, minTTL: minTTL)
    }

    /// Whether a served token is past `refresh_on` (behaviour §1 proactive refresh) at `now`
    /// (Unix seconds; nil reads the clock).
    package func refreshDue(_ token: StoredAccessToken, now: Int? = nil) -> Bool {
        TokenFreshness.evaluate(token.times, now: now ?? self.now(), expirySkew: expirySkewSeconds, minTTL: 0) == .refreshDue
    }
}
