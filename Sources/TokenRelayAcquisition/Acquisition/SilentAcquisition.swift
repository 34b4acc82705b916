import Foundation
import IdentityCore
import TokenRelayBase
import TokenRelayStore

/// The server-side `acquireTokenSilent` (behaviour §2): resolve the account, serve from the cache
/// (memory, then the encrypted persistent cache), else redeem the refresh token (coalesced in
/// the replica, leased across replicas, ADR 0012), else a clear `interaction_required`.
///
/// The parts, each with one job: ``AccountResolver``, ``TokenCacheReader``,
/// ``CoalescedRefresher`` (over ``RefreshExecutor`` and ``RefreshStateMachine``) and
/// ``BackgroundRefresher``; this type puts them in order and keeps the per-replica memories.
package struct SilentAcquisition: Sendable {
    package let resolver: AccountResolver
    package let cache: TokenCacheReader
    package let refresher: CoalescedRefresher
    package let background: BackgroundRefresher
    package let store: TokenStore
    package let sts: STSClient
    package let authorities: AuthorityValidator
    package let declinedScopes: DeclinedScopesMemory
    /// Interaction-required answers replayed without an STS call (behaviour §5).
    package let uiRequired: UIRequiredMemory
    /// The throttle memories whose entries can be an account's (the STS client's, the downstream
    /// APIs'): forgotten with the account's other memories (behaviour §12).
    package let throttles: [ThrottleMemory]
    package let clientId: String
    package let clientCapabilities: [String]
    package let metrics: Metrics
    package let logger: Logger
    package let now: @Sendable () -> Int

    package init(
        resolver: AccountResolver, cache: TokenCacheReader, refresher: CoalescedRefresher, background: BackgroundRefresher, store: TokenStore, sts: STSClient,
        authorities: AuthorityValidator, declinedScopes: DeclinedScopesMemory, uiRequired: UIRequiredMemory, throttles: [ThrottleMemory], clientId: String,
        clientCapabilities: [String], metrics: Metrics, logger: Logger, now: @escaping @Sendable () -> Int, allowExtendedLifetime: Bool = false,
        suspensions: TenantSuspensions = TenantSuspensions()
    ) {
        self.resolver = resolver
        self.cache = cache
        self.refresher = refresher
        self.background = background
        self.store = store
        self.sts = sts
        self.authorities = authorities
        self.declinedScopes = declinedScopes
        self.uiRequired = uiRequired
        self.throttles = throttles
        self.clientId = clientId
        self.clientCapabilities = clientCapabilities
        self.metrics = metrics
        self.logger = logger
        self.now = now
        self.allowExtendedLifetime = allowExtendedLifetime
        self.suspensions = suspensions
    }
    /// Serve a token past `expires_on` but before `ext_expires_on` while the STS is unavailable
    /// (behaviour §5, `TOKENRELAY_ALLOW_EXTENDED_LIFETIME`). Default false.
    package var allowExtendedLifetime = false
    /// Suspended tenants, refused before any cache or STS (behaviour §12 Tenants).
    package var suspensions = TenantSuspensions()

    package var memory: MemoryTokenCache { cache.memory }
    package var accounts: AccountCache { resolver.accounts }
    package var pendingRotations: PendingRotations { refresher.executor.pendingRotations }
    package var executor: RefreshExecutor { refresher.executor }

    /// Acquires a token for `request`.
    /// - Throws: `RelayError`: 404 `account_not_found`, 409 `ambiguous_account`,
    ///   `interaction_required` or `server_declined_scopes`, 403 `tenant_suspended` (behaviour §12
    ///   Tenants), 429 `throttled`, 502, 503/504.
    package func acquire(_ request: SilentTokenRequest, context: RequestContext) async throws -> SilentTokenResult {
        try context.access.check(request)
        if case .accountId(let id) = request.account, !request.bypassesCache, !memory.holdsTokens(of: id) {
            // The cache will be read and memory holds none of the account's tokens: an account
            // read from PostgreSQL brings its stored tokens in the same round trip (issue 13).
            // Whether the key sees it is the first check of `acquire(_:for:context:)`.
            let (account, tokens) = try await resolver.byAccountId(id, owner: context.owner, readingTokens: true)
            return try await acquire(request, for: account, storedTokens: tokens, context: context)
        }
        let account = try await resolver.resolve(request.account, visibleTo: context.access, owner: context.owner)
        return try await acquire(request, for: account, context: context)
    }

    /// Finds the account named by `selector` (see ``AccountResolver``); an `account_id` may be
    /// an external id of `owner` (behaviour §3.7).
    package func resolve(_ selector: SilentTokenRequest.AccountSelector, owner: String? = nil) async throws -> AccountRecord {
        try await resolver.resolve(selector, owner: owner)
    }

    /// The memory-only answer for `request`, or nil when it needs the database or the STS.
    ///
    /// Runs on the server thread without suspending (behaviour §10): account and token both come
    /// from this replica's memory, and nothing is written.
    package func acquireFromMemory(_ request: SilentTokenRequest) -> SilentTokenResult? {
        guard case .accountId(let id) = request.account, !request.forceRefresh, request.authority == nil,
            !ClaimsRequest.bypassesCache(claims: request.claims), let account = accounts.account(id: id), account.state == .active,
            suspensions.suspendedTenant(of: account) == nil,
            let hit = cache.memoryHit(
                accountId: id, environment: account.environment, realm: account.realm, scopes: request.scopes, minTTL: request.minTTLSeconds)
        else { return nil }
        metrics.memoryCacheHits.increment()
        served(hit.token, account: account, scopes: request.scopes)
        return SilentTokenResult(token: hit.token, account: account, source: .cache, declinedScopes: [], prebuiltAnswer: hit.answer)
    }

    /// Acquires a token for an account already resolved (downstream calls resolve once).
    /// - Parameter storedTokens: the account's stored access tokens in its own realm, when they
    ///   were read with it (``AccountResolver/byAccountId(_:owner:readingTokens:)``); nil: read
    ///   them if memory cannot answer.
    package func acquire(
        _ request: SilentTokenRequest, for account: AccountRecord, storedTokens: [StoredAccessToken]? = nil, context: RequestContext
    ) async throws -> SilentTokenResult {
        try context.access.check(request)
        guard context.access.sees(account) else { throw RelayError.accountNotFound() }
        try suspensions.check(account)
        guard account.state == .active else { throw Self.deadRefreshToken(account, request: request) }
        if account.homeAccountId == nil {
            // An ADAL import not yet redeemed: the first redemption learns (or merges) its identity.
            // Like a refresh, it runs on past the caller's deadline (its rotated refresh token must
            // be stored) while the caller gets its 504 at the deadline (behaviour §5 Deadlines).
            let key = "import|" + account.accountId + "|" + request.scopes.cacheKey + "|" + (request.claims ?? "")
            let (done, _) = try await refresher.imports.run(key: key, until: context.deadline) {
                try await completeImport(account, request: request, context: context)
            }
            if let done { return done }
            return try await acquire(request, for: try await resolver.resolve(.accountId(account.accountId)), context: context)
        }
        let (authority, realm) = try authorities.authorityAndRealm(request.authority, for: account)
        // A key that sees a guest through another tenant's profile gets no home-tenant token.
        try context.access.check(realm: realm)
        let claims = try mergedClaims(request.claims)
        let bypassCache = request.bypassesCache
        let minTTL = request.minTTLSeconds
        let uiRequiredKey = UIRequiredMemory.key(realm: realm, scopesKey: request.scopes.cacheKey, claims: claims)
        if let replayed = uiRequired.recall(accountId: account.accountId, key: uiRequiredKey, now: now()) {
            metrics.increment("tokenrelay_ui_required_replayed_total")
            throw replayed
        }

        let declinedKey = DeclinedScopesMemory.key(realm: realm, scopes: request.scopes)
        // A scope-limited key is served a cached token only when every scope the token carries is
        // the key's to ask for (behaviour §12.20): the cache is shared, and a token another caller
        // asked for more scopes covers this request too. Otherwise the refresh token is redeemed
        // for this request's scopes, bypassing the cache, and the new token replaces the wider one.
        var exceedsKey = false
        if !bypassCache {
            if let remembered = declinedScopes.recall(accountId: account.accountId, key: declinedKey, now: now()),
                cache.usable(remembered.token, minTTL: minTTL)
            {
                if context.access.allows(remembered.token) {
                    return try answer(
                        remembered.token, declined: remembered.declined, account: account, source: .cache, allowPartial: request.allowPartial)
                }
                exceedsKey = true
            }
            if !exceedsKey,
                let (hit, layer) = try await cache.lookup(account: account, realm: realm, scopes: request.scopes, minTTL: minTTL, read: storedTokens)
            {
                if context.access.allows(hit) {
                    metrics.increment("tokenrelay_token_cache_total", ["outcome": "hit", "layer": layer.rawValue])
                    served(hit, account: account, scopes: request.scopes, authority: authority, claims: claims)
                    return SilentTokenResult(token: hit, account: account, source: .cache, declinedScopes: [])
                }
                exceedsKey = true
            }
        }

        let refresh = RefreshExecutor.Request(
            account: account, authority: authority, realm: realm, scopes: request.scopes, claims: claims,
            mode: bypassCache || exceedsKey ? .bypass : .cacheFirst, minTTL: minTTL, context: context)
        let (outcome, _) = try await refresher.run(refresh, until: context.deadline)
        background.absorb(outcome, accountId: account.accountId)
        switch outcome {
        case .failure(let error):
            if !bypassCache, let extended = try await extendedLifetimeToken(after: error, account: account, realm: realm, scopes: request.scopes),
                context.access.allows(extended)
            {
                return SilentTokenResult(token: extended, account: account, source: .cache, declinedScopes: [], extendedLifetime: true)
            }
            var problem = RelayError(error, requestedScopes: request.scopes)
            if problem.code == .interactionRequired {
                problem.signInHint = SignInHint(
                    account: account, scopes: request.scopes.canonical, claims: SignInHint.claims(for: problem, requested: request.claims),
                    authority: request.authority?.url)
            }
            if problem.replayable {
                uiRequired.remember(problem, accountId: account.accountId, key: uiRequiredKey, now: now())
            }
            throw problem
        case .token(let token, let declined, let source):
            touch(account.accountId)
            if !declined.isEmpty {
                declinedScopes.remember(.init(token: token, declined: declined), accountId: account.accountId, key: declinedKey, now: now())
            }
            // The platform may grant more than was asked (scopes consented earlier): such a token
            // is kept for callers who may have it, never handed to this key.
            try context.access.check(served: token)
            return try answer(token, declined: declined, account: account, source: source, allowPartial: request.allowPartial)
        }
    }

    /// The token, or 409 `server_declined_scopes` when scopes were declined and the caller did not
    /// accept a partial grant (behaviour §4).
    package func answer(
        _ token: StoredAccessToken, declined: [String], account: AccountRecord, source: SilentTokenResult.Source, allowPartial: Bool
    ) throws -> SilentTokenResult {
        if !declined.isEmpty && !allowPartial {
            throw RelayError(
                .serverDeclinedScopes, "The identity provider granted fewer scopes than requested.",
                extensions: [
                    "granted_scopes": .array(token.scopes.map(JSONValue.string)),
                    "declined_scopes": .array(declined.map(JSONValue.string)),
                ])
        }
        return SilentTokenResult(token: token, account: account, source: source, declinedScopes: declined)
    }

    /// The caller's claims merged with the client capabilities (the STS `claims` parameter).
    /// - Throws: `RelayError` 400 `invalid_request` field `claims` when they are not a JSON object.
    package func mergedClaims(_ claims: String?) throws -> String? {
        do {
            return try ClaimsRequest.merged(claims: claims, capabilities: clientCapabilities)
        } catch {
            throw RelayError.invalidRequest(field: "claims", "'claims' must be a JSON object, as JSON text or base64.")
        }
    }

    /// One keep-alive redemption (see ``BackgroundRefresher/keepAlive(account:scopes:context:)``).
    package func keepAliveRefresh(account: AccountRecord, scopes: ScopeSet, context: RequestContext) async throws -> RefreshExecutor.Outcome {
        try await background.keepAlive(account: account, scopes: scopes, context: context)
    }

    /// Drops everything this replica holds in memory for the account (deleted, signed in again,
    /// refresh token dead).
    package func forgetInMemory(_ accountId: String) {
        Self.forget(accountId, memory: memory, accounts: accounts, declinedScopes: declinedScopes, uiRequired: uiRequired, throttles: throttles)
    }

    /// The one place an account is forgotten in memory: its access tokens, its record, and its
    /// declined-scopes, UI-required and throttle memories (behaviour §12 Memories and replicas), for a
    /// local sign-in, a dead refresh token and the `ReplicaInvalidation` hooks alike.
    package static func forget(
        _ accountId: String, memory: MemoryTokenCache, accounts: AccountCache, declinedScopes: DeclinedScopesMemory, uiRequired: UIRequiredMemory,
        throttles: [ThrottleMemory]
    ) {
        memory.removeAll(accountId: accountId)
        accounts.remove(id: accountId)
        declinedScopes.forget(accountId: accountId)
        uiRequired.forget(accountId: accountId)
        for throttle in throttles { throttle.forget(accountId: accountId) }
    }

    // MARK: After a cache hit

    /// Work a served cache hit may start, never awaited by the caller: one background refresh
    /// once `refresh_on` has passed (behaviour §1 proactive refresh), and `last_used_at` at most once
    /// per 5 minutes (behaviour §12 Accounts).
    private func served(_ token: StoredAccessToken, account: AccountRecord, scopes: ScopeSet, authority: Authority? = nil, claims: String? = nil) {
        touch(account.accountId)
        guard cache.refreshDue(token) else { return }
        background.refreshSoon(token, account: account, scopes: scopes, authority: authority, claims: claims)
    }

    /// Records use of the account in the background when this replica has not for 5 minutes.
    private func touch(_ accountId: String) {
        guard accounts.claimTouch(id: accountId, now: now()) else { return }
        let store = self.store
        background.tasks.startIfRoom { try? await store.touch(accountId: accountId) }
    }
}
