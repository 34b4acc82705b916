import Foundation
import IdentityCore
import TokenRelayBase
import TokenRelayStore
import TokenRelayUpstream

/// The server-side `acquireTokenSilent` (behaviour §2): resolve the account, serve from the cache
/// (memory, then the encrypted persistent cache), else redeem the refresh token (coalesced in
/// the replica, leased across replicas, ADR 0012), else a clear `interaction_required`.
///
/// The parts, each with one job: ``AccountResolver``, ``TokenCacheReader``,
/// ``CoalescedRefresher`` (over ``RefreshExecutor`` and ``RefreshStateMachine``) and
/// ``BackgroundRefresher``; this type puts them in order and keeps the per-replica memories.
package struct SilentAcquisition: Sendable {
    package let resolver: AccountResolver
    /// Every per-replica memory of accounts and tenants (``ReplicaMemory``).
    package let memories: ReplicaMemory
    package let cache: TokenCacheReader
    package let refresher: CoalescedRefresher
    package let background: BackgroundRefresher
    package let store: TokenStore
    package let sts: STSClient
    package let authorities: AuthorityValidator
    package let clientId: String
    package let clientCapabilities: [String]
    package let metrics: Metrics
    package let logger: Logger
    package let now: @Sendable () -> Int

    package init(
        resolver: AccountResolver, cache: TokenCacheReader, refresher: CoalescedRefresher, background: BackgroundRefresher, memories: ReplicaMemory,
        store: TokenStore, sts: STSClient,
        authorities: AuthorityValidator, clientId: String,
        clientCapabilities: [String], metrics: Metrics, logger: Logger, now: @escaping @Sendable () -> Int, allowExtendedLifetime: Bool = false,
        suspensions: TenantSuspensions = TenantSuspensions()
    ) {
        self.resolver = resolver
        self.cache = cache
        self.refresher = refresher
        self.background = background
        self.memories = memories
        self.store = store
        self.sts = sts
        self.authorities = authorities
        self.clientId = clientId
        self.clientCapabilities = clientCapabilities
        self.metrics = metrics
        self.logger = logger
        self.now = now
        self.allowExtendedLifetime = allowExtendedLifetime
        self.suspensions = suspensions
        planRules = SilentPlan.Rules(
            authorities: authorities, clientCapabilities: clientCapabilities, expirySkewSeconds: cache.expirySkewSeconds,
            allowExtendedLifetime: allowExtendedLifetime)
    }
    /// Serve a token past `expires_on` but before `ext_expires_on` while the STS is unavailable
    /// (behaviour §5, `TOKENRELAY_ALLOW_EXTENDED_LIFETIME`). Default false.
    package let allowExtendedLifetime: Bool
    /// What every plan decides with (``SilentPlan/Rules``), made once.
    private let planRules: SilentPlan.Rules
    /// Suspended tenants, refused before any cache or STS (behaviour §12 Tenants).
    package var suspensions = TenantSuspensions()

    package var memory: MemoryTokenCache { cache.memory }
    /// Scopes the STS declined, replayed without an STS call (behaviour §12 Token requests).
    package var declinedScopes: DeclinedScopesMemory { memories.declinedScopes }
    /// Interaction-required answers replayed without an STS call (behaviour §5).
    package var uiRequired: UIRequiredMemory { memories.uiRequired }
    package var accounts: AccountCache { resolver.accounts }
    package var pendingRotations: PendingRotations { refresher.executor.pendingRotations }
    package var executor: RefreshExecutor { refresher.executor }

    /// The plan for `request` made by a caller with `access` (behaviour §2.2): ``SilentPlan``.
    package func plan(_ request: SilentTokenRequest, access: KeyAccess) -> SilentPlan {
        SilentPlan(request: request, access: access, rules: planRules, now: now())
    }

    /// Acquires a token for `request`.
    /// - Throws: `RelayError`: 404 `account_not_found`, 409 `ambiguous_account`,
    ///   `interaction_required` or `server_declined_scopes`, 403 `tenant_suspended` (behaviour §12
    ///   Tenants), 429 `throttled`, 502, 503/504.
    package func acquire(_ request: SilentTokenRequest, context: RequestContext) async throws -> SilentTokenResult {
        try await acquire(continuing: plan(request, access: context.access), context: context)
    }

    /// Acquires a token for an account already resolved (downstream calls resolve once).
    package func acquire(_ request: SilentTokenRequest, for account: AccountRecord, context: RequestContext) async throws -> SilentTokenResult {
        var plan = plan(request, access: context.access)
        plan.learn(account: account, storedTokens: nil)
        return try await acquire(continuing: plan, context: context)
    }

    /// Finds the account named by `selector` (see ``AccountResolver``); an `account_id` may be
    /// an external id of `owner` (behaviour §3.7).
    package func resolve(_ selector: SilentTokenRequest.AccountSelector, owner: String? = nil) async throws -> AccountRecord {
        try await resolver.resolve(selector, owner: owner)
    }

    /// Runs `plan` to its answer from wherever it stands (the server thread may have taken it as
    /// far as memory goes: ``answerFromMemory(_:owner:)``), with PostgreSQL and the STS.
    /// - Throws: as ``acquire(_:context:)``.
    package func acquire(continuing plan: SilentPlan, context: RequestContext) async throws -> SilentTokenResult {
        var plan = plan
        plan.now = now()
        while true {
            switch plan.next() {
            case .resolveAccount:
                if case .accountId(let id) = plan.request.account, !plan.request.bypassesCache, !memory.holdsTokens(of: id) {
                    // The cache will be read and memory holds none of the account's tokens: an
                    // account read from PostgreSQL brings its stored tokens in the same round trip
                    // (issue 13). Whether the key sees it is the plan's next check.
                    let (account, tokens) = try await resolver.byAccountId(id, owner: context.owner, readingTokens: true)
                    plan.learn(account: account, storedTokens: tokens)
                } else {
                    plan.learn(account: try await resolver.resolve(plan.request.account, visibleTo: context.access, owner: context.owner), storedTokens: nil)
                }
            case .checkSuspension:
                plan.learn(suspendedTenant: suspensions.suspendedTenant(of: plan.account!))
            case .checkMemories:
                plan.learn(memoriesHoldUIRequired: uiRequired.mayHold(now: plan.now), declinedScopes: declinedScopes.mayHold(now: plan.now))
            case .completeImport:
                // An ADAL import not yet redeemed: the first redemption learns (or merges) its
                // identity. Like a refresh, it runs on past the caller's deadline (its rotated
                // refresh token must be stored) while the caller gets its 504 at the deadline
                // (behaviour §5 Deadlines).
                let (account, request) = (plan.account!, plan.request)
                let key = "import|" + account.accountId + "|" + request.scopes.cacheKey + "|" + (request.claims ?? "")
                let (done, _) = try await refresher.imports.run(key: key, until: context.deadline) {
                    try await completeImport(account, request: request, context: context)
                }
                if let done { return done }
                plan.learn(account: try await resolver.resolve(.accountId(account.accountId)), storedTokens: nil)
            case .lookUpMemoryCache:
                plan.learn(memoryHit: memoryHit(plan.lookup))
            case .recallDeclinedScopes:
                plan.learn(declined: declinedScopes.recall(accountId: plan.account!.accountId, key: plan.recallKey, now: plan.now))
            case .lookUpStoredCache:
                let lookup = plan.lookup
                plan.learn(
                    storedHit: try await cache.lookUpStored(
                        account: plan.account!, realm: lookup.realm, scopes: lookup.scopes, minTTL: lookup.minTTL, read: plan.storedTokensRead))
            case .recallUIRequired:
                plan.learn(uiRequired: uiRequired.recall(accountId: plan.account!.accountId, key: plan.recallKey, now: plan.now))
            case .refresh:
                let redemption = plan.redemption!
                let request = RefreshExecutor.Request(
                    account: redemption.account, authority: redemption.authority, realm: redemption.realm, scopes: redemption.scopes,
                    claims: redemption.claims, mode: redemption.mode, minTTL: redemption.minTTL, context: context)
                let (outcome, _) = try await refresher.run(request, until: context.deadline)
                background.absorb(outcome, accountId: redemption.account.accountId)
                plan.now = now()
                plan.learn(outcome: outcome)
            case .lookUpExtendedLifetime:
                let lookup = plan.lookup
                plan.learn(extended: try await extendedLifetimeToken(after: plan.failure!, account: plan.account!, realm: lookup.realm, scopes: lookup.scopes))
            case .answer:
                carryOut(plan.aftermath, for: plan)
                return plan.answer!
            case .refuse:
                carryOut(plan.aftermath, for: plan)
                throw plan.refusal!
            }
        }
    }

    /// A servable token for `lookup` in this replica's memory, with its prebuilt answer.
    package func memoryHit(_ lookup: SilentPlan.CacheLookup) -> MemoryTokenCache.Hit? {
        cache.memoryHit(
            accountId: lookup.accountId, environment: lookup.environment, realm: lookup.realm, scopes: lookup.scopes, minTTL: lookup.minTTL, now: lookup.now)
    }

    /// Does what an answer or a refusal of `plan` entails (``SilentPlan/Aftermath``).
    /// - Parameter touchDue: false when the account was read from memory with its use recorded
    ///   within ``AccountCache/touchInterval`` (nothing to claim).
    package func carryOut(_ after: SilentPlan.Aftermath, for plan: SilentPlan, touchDue: Bool = true) {
        switch after {
        case .nothing:
            break
        case .servedFromCache(let token, let layer, let authority, let claims):
            if layer == .memory {
                metrics.memoryCacheHits.increment()
            } else {
                metrics.increment("tokenrelay_token_cache_total", ["outcome": "hit", "layer": layer.rawValue])
            }
            if let account = plan.account {
                served(token, account: account, scopes: plan.request.scopes, authority: authority, claims: claims, now: plan.now, touchDue: touchDue)
            }
        case .refreshed(let token, let declined, let declinedKey):
            guard let account = plan.account else { return }
            touch(account.accountId, now: plan.now)
            if !declined.isEmpty {
                declinedScopes.remember(.init(token: token, declined: declined), accountId: account.accountId, key: declinedKey, now: now())
            }
        case .replayedUIRequired:
            metrics.increment("tokenrelay_ui_required_replayed_total")
        case .rememberUIRequired(let problem, let key):
            guard let account = plan.account else { return }
            uiRequired.remember(problem, accountId: account.accountId, key: key, now: now())
        }
    }

    /// The caller's claims merged with the client capabilities (the STS `claims` parameter).
    /// - Throws: `RelayError` 400 `invalid_request` field `claims` when they are not a JSON object.
    package func mergedClaims(_ claims: String?) throws(RelayError) -> String? {
        try SilentPlan.mergedClaims(claims, capabilities: clientCapabilities)
    }

    /// One keep-alive redemption (see ``BackgroundRefresher/keepAlive(account:scopes:context:)``).
    package func keepAliveRefresh(account: AccountRecord, scopes: ScopeSet, context: RequestContext) async throws -> RefreshExecutor.Outcome {
        try await background.keepAlive(account: account, scopes: scopes, context: context)
    }

    /// Drops everything this replica holds in memory for the account (deleted, signed in again,
    /// refresh token dead): ``ReplicaMemory/forget(account:)``.
    package func forgetInMemory(_ accountId: String) {
        memories.forget(account: accountId)
    }

    // MARK: After a cache hit

    /// Work a served cache hit may start, never awaited by the caller: one background refresh
    /// once `refresh_on` has passed (behaviour §1 proactive refresh), and `last_used_at` at most once
    /// per 5 minutes (behaviour §12 Accounts).
    /// `now`: the plan's time (Unix seconds), read once per request.
    private func served(
        _ token: StoredAccessToken, account: AccountRecord, scopes: ScopeSet, authority: Authority?, claims: String?, now: Int, touchDue: Bool
    ) {
        if touchDue { touch(account.accountId, now: now) }
        guard cache.refreshDue(token, now: now) else { return }
        background.refreshSoon(token, account: account, scopes: scopes, authority: authority, claims: claims)
    }

    /// Records use of the account in the background when this replica has not for 5 minutes.
    private func touch(_ accountId: String, now: Int) {
        guard accounts.claimTouch(id: accountId, now: now) else { return }
        let store = self.store
        background.tasks.startIfRoom { try? await store.touch(accountId: accountId) }
    }
}
