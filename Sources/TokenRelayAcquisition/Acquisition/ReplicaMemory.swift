import TokenRelayBase
import TokenRelayUpstream

/// Everything one replica holds in memory about accounts and tenants (behaviour §12 Memories and
/// replicas), in one place, so that forgetting is written once: a local sign-in, a dead refresh
/// token, a deletion, a suspension and every cross-replica notification (``ReplicaInvalidation``)
/// call the same ``forget(account:)`` and ``forget(tenant:)``. A new memory joins here and is
/// forgotten everywhere at once.
///
/// What it holds: access tokens (``MemoryTokenCache``), account records (``AccountCache``),
/// interaction-required answers (``UIRequiredMemory``), declined scopes
/// (``DeclinedScopesMemory``), throttle answers whose keys can be an account's (the STS client's
/// and the downstream APIs' ``ThrottleMemory``), and app and on-behalf-of tokens
/// (``GrantTokenMemory``, per realm).
package final class ReplicaMemory: Sendable {
    package let tokens: MemoryTokenCache
    package let accounts: AccountCache
    package let uiRequired: UIRequiredMemory
    package let declinedScopes: DeclinedScopesMemory
    package let throttles: [ThrottleMemory]
    package let grantTokens: GrantTokenMemory

    package init(
        tokens: MemoryTokenCache, accounts: AccountCache, uiRequired: UIRequiredMemory, declinedScopes: DeclinedScopesMemory, throttles: [ThrottleMemory],
        grantTokens: GrantTokenMemory
    ) {
        self.tokens = tokens
        self.accounts = accounts
        self.uiRequired = uiRequired
        self.declinedScopes = declinedScopes
        self.throttles = throttles
        self.grantTokens = grantTokens
    }

    /// Drops all that is held of one account: deleted, signed in again, its refresh token dead,
    /// or changed on another replica.
    package func forget(account accountId: String) {
        tokens.removeAll(accountId: accountId)
        accounts.remove(id: accountId)
        declinedScopes.forget(accountId: accountId)
        uiRequired.forget(accountId: accountId)
        for throttle in throttles { throttle.forget(accountId: accountId) }
    }

    /// Drops an account's access tokens alone: a token fetched with claims replaced them in
    /// PostgreSQL (a claims challenge, `tokens.replaced`).
    package func forgetAccessTokens(of accountId: String) {
        tokens.removeAll(accountId: accountId)
    }

    /// Drops all that is held of a tenant (lower-cased GUID): suspended, or forgotten with its
    /// data key (ADR 0017): its accounts as ``forget(account:)`` does, and every token of its realm.
    package func forget(tenant: String) {
        for accountId in accounts.accountIds(ofTenant: tenant) { forget(account: accountId) }
        tokens.removeAll(realm: tenant)
        grantTokens.removeAll(realm: tenant)
    }

    /// Drops what a missed notification could have made stale (the listener came back after a
    /// gap): account records and access tokens. The answers kept for their own short lifetimes
    /// (UI-required, declined scopes, throttles) stay.
    package func removeAll() {
        accounts.removeAll()
        tokens.removeAll()
    }

    /// Bytes and entries of the byte-bounded memories, by the `cache` label of
    /// `tokenrelay_memory_cache_*`.
    package var usage: [String: MemoryUsage] { ["tokens": tokens.usage, "accounts": accounts.usage] }
}
