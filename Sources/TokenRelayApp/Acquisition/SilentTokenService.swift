import Foundation
import IdentityCore
import PostgresBridge
import Synchronization

/// The server-side `acquireTokenSilent` (SPEC §2): cache first (memory, then the encrypted
/// persistent cache), else redeem the refresh token under a per-account lock, else a clear
/// `interaction_required`.
struct SilentTokenService: Sendable {
    let store: TokenStore
    let sts: STSClient
    let authorities: AuthorityValidator
    let memory: MemoryTokenCache
    let accounts: AccountCache
    let declinedScopes: DeclinedScopesMemory
    let coalescer: RefreshCoalescer<RefreshOutcome>
    let clientId: String
    let clientCapabilities: [String]
    let expirySkewSeconds: Int
    let metrics: Metrics
    let logger: Logger
    let now: @Sendable () -> Int
    /// Interaction-required answers replayed without an STS call (SPEC §5).
    var uiRequired = UIRequiredMemory()
    /// Serve a token past `expires_on` but before `ext_expires_on` while the STS is unavailable
    /// (SPEC §5, `TOKENRELAY_ALLOW_EXTENDED_LIFETIME`). Default false.
    var allowExtendedLifetime = false
    /// Rotations the STS returned that could not be stored yet (see ``persistRotation``).
    var pendingRotations = PendingRotations()

    /// How a refresh treats the cache it re-reads under the lock.
    enum RefreshMode: String, Sendable {
        /// No usable token was found: one another replica stored meanwhile is served.
        case cacheFirst = "cache"
        /// `refresh_on` passed: only a token that is not yet due for refresh counts as done.
        case proactive
        /// `force_refresh` or claims: the STS is asked whatever is cached.
        case bypass
    }

    /// What one refresh produced, shared by every request that joined it.
    enum RefreshOutcome: Sendable {
        case token(StoredAccessToken, declined: [String], source: SilentTokenResult.Source)
        case problem(Problem)
    }

    /// Acquires a token for `request`.
    /// - Throws: `Problem`: 404 `account_not_found`, 409 `ambiguous_account`,
    ///   `interaction_required` or `server_declined_scopes`, 429 `throttled`, 502, 503/504.
    func acquire(_ request: SilentTokenRequest, context: RequestContext) async throws -> SilentTokenResult {
        try context.access.check(request)
        let account = try await resolve(request.account, visibleTo: context.access)
        return try await acquire(request, for: account, context: context)
    }

    /// The memory-only answer for `request`, or nil when it needs the database or the STS.
    ///
    /// Runs on the server thread without suspending (SPEC §10): account and token both come
    /// from this replica's memory, and nothing is written.
    func acquireFromMemory(_ request: SilentTokenRequest) -> SilentTokenResult? {
        guard case .accountId(let id) = request.account, !request.forceRefresh, request.authority == nil,
            !ClaimsRequest.bypassesCache(claims: request.claims), let account = accounts.account(id: id), account.state == .active,
            let token = memory.lookup(accountId: id, environment: account.environment, realm: account.realm, scopes: request.scopes),
            usable(token, minTTL: request.minTTLSeconds)
        else { return nil }
        metrics.memoryCacheHits.increment()
        served(token, account: account, scopes: request.scopes)
        return SilentTokenResult(token: token, account: account, source: .cache, declinedScopes: [])
    }

    /// Acquires a token for an account already resolved (downstream calls resolve once).
    func acquire(_ request: SilentTokenRequest, for account: AccountRecord, context: RequestContext) async throws -> SilentTokenResult {
        try context.access.check(request)
        guard context.access.sees(account) else { throw Problem.accountNotFound() }
        guard account.state == .active else {
            var problem = Problem(
                .interactionRequired, "The account's refresh token is no longer valid; the user must sign in again.",
                extensions: ["account_state": .string(account.state.rawValue), "account_id": .string(account.accountId)])
            problem.signInHint = SignInHint(account: account, scopes: request.scopes.canonical, claims: request.claims, authority: request.authority?.url)
            throw problem
        }
        if account.homeAccountId == nil {
            // An ADAL import not yet redeemed: the first redemption learns (or merges) its identity.
            if let done = try await completeImport(account, request: request, context: context) { return done }
            return try await acquire(request, for: try await resolve(.accountId(account.accountId)), context: context)
        }
        let (authority, realm) = try authorityAndRealm(request.authority, for: account)
        // A key that sees a guest through another tenant's profile gets no home-tenant token.
        try context.access.check(realm: realm)
        let claims = try mergedClaims(request.claims)
        let bypassCache = request.forceRefresh || ClaimsRequest.bypassesCache(claims: request.claims)
        let minTTL = request.minTTLSeconds
        let uiRequiredKey = UIRequiredMemory.key(realm: realm, scopesKey: request.scopes.cacheKey, claims: claims)
        if let replayed = uiRequired.recall(accountId: account.accountId, key: uiRequiredKey, now: now()) {
            metrics.increment("tokenrelay_ui_required_replayed_total")
            throw replayed
        }

        let declinedKey = DeclinedScopesMemory.key(realm: realm, scopes: request.scopes)
        if !bypassCache {
            if let remembered = declinedScopes.recall(accountId: account.accountId, key: declinedKey, now: now()),
                usable(remembered.token, minTTL: minTTL)
            {
                return try answer(remembered.token, declined: remembered.declined, account: account, source: .cache, allowPartial: request.allowPartial)
            }
            func cacheHit(_ hit: StoredAccessToken, layer: String) -> SilentTokenResult {
                metrics.increment("tokenrelay_token_cache_total", ["outcome": "hit", "layer": layer])
                served(hit, account: account, scopes: request.scopes, authority: authority, claims: claims)
                return SilentTokenResult(token: hit, account: account, source: .cache, declinedScopes: [])
            }
            if let hit = memory.lookup(accountId: account.accountId, environment: account.environment, realm: realm, scopes: request.scopes),
                usable(hit, minTTL: minTTL)
            {
                return cacheHit(hit, layer: "memory")
            }
            let stored = try await store.accessTokens(accountId: account.accountId, environment: account.environment, realm: realm)
            if let hit = best(stored, covering: request.scopes, minTTL: minTTL) {
                memory.store(hit, now: now())
                return cacheHit(hit, layer: "database")
            }
            metrics.increment("tokenrelay_token_cache_total", ["outcome": "miss"])
        }

        let mode: RefreshMode = bypassCache ? .bypass : .cacheFirst
        let key = [account.accountId, realm, request.scopes.cacheKey, claims ?? "", mode.rawValue, String(minTTL)].joined(separator: "|")
        // A redemption, once sent, is never cut short by this caller's deadline: the STS may
        // already have rotated the refresh token. The caller stops waiting at its deadline.
        var redemption = context
        redemption.minimumAttemptSeconds = 30
        let (outcome, joined) = try await coalescer.run(key: key, until: context.deadline) { [redemption] in
            try await refresh(
                account: account, authority: authority, realm: realm, scopes: request.scopes, claims: claims, mode: mode, minTTL: minTTL,
                context: redemption)
        }
        if joined { metrics.increment("tokenrelay_refresh_coalesced_total") }
        switch outcome {
        case .problem(var problem):
            if problem.extensions["account_state"] == .string("interaction_required") {
                forgetInMemory(account.accountId)
            }
            if !bypassCache, let extended = try await extendedLifetimeToken(after: problem, account: account, realm: realm, scopes: request.scopes) {
                return SilentTokenResult(token: extended, account: account, source: .cache, declinedScopes: [], extendedLifetime: true)
            }
            if problem.code == .interactionRequired {
                problem.signInHint = SignInHint(account: account, scopes: request.scopes.canonical, claims: request.claims, authority: request.authority?.url)
            }
            if problem.replayable {
                uiRequired.remember(problem, accountId: account.accountId, key: uiRequiredKey, now: now())
            }
            throw problem
        case .token(let token, let declined, let source):
            memory.store(token, now: now())
            touch(account.accountId)
            if !declined.isEmpty {
                declinedScopes.remember(.init(token: token, declined: declined), accountId: account.accountId, key: declinedKey, now: now())
            }
            return try answer(token, declined: declined, account: account, source: source, allowPartial: request.allowPartial)
        }
    }

    /// The token, or 409 `server_declined_scopes` when scopes were declined and the caller did not
    /// accept a partial grant (SPEC §4).
    func answer(
        _ token: StoredAccessToken, declined: [String], account: AccountRecord, source: SilentTokenResult.Source, allowPartial: Bool
    ) throws -> SilentTokenResult {
        if !declined.isEmpty && !allowPartial {
            throw Problem(
                .serverDeclinedScopes, "The identity provider granted fewer scopes than requested.",
                extensions: [
                    "granted_scopes": .array(token.scopes.map(JSONValue.string)),
                    "declined_scopes": .array(declined.map(JSONValue.string)),
                ])
        }
        return SilentTokenResult(token: token, account: account, source: source, declinedScopes: declined)
    }

    /// The caller's claims merged with the client capabilities (the STS `claims` parameter).
    /// - Throws: `Problem` 400 `invalid_request` field `claims` when they are not a JSON object.
    func mergedClaims(_ claims: String?) throws -> String? {
        do {
            return try ClaimsRequest.merged(claims: claims, capabilities: clientCapabilities)
        } catch {
            throw Problem.invalidRequest(field: "claims", "'claims' must be a JSON object, as JSON text or base64.")
        }
    }

    /// Finds the account named by `selector`.
    /// - Throws: `Problem` 404 `account_not_found`, 409 `ambiguous_account` with `account_ids`.
    func resolve(_ selector: SilentTokenRequest.AccountSelector) async throws -> AccountRecord {
        switch selector {
        case .accountId(let id):
            if let cached = accounts.account(id: id) { return cached }
            let mark = accounts.readMark
            guard let account = try await store.account(id: id) else { throw Problem.accountNotFound() }
            accounts.store(account, readMark: mark)
            return account
        case .homeAccountId(let home):
            // One home_account_id may be signed in through several clouds (environments).
            return try Self.single(try await store.accounts(homeAccountId: home), "home_account_id")
        case .username(let username, let tenantId):
            return try Self.single(try await store.accounts(username: username, tenantId: tenantId), "username; narrow by tenant_id")
        }
    }

    /// Finds the account named by `selector` among those the caller's key sees (an account
    /// outside the key's tenants is 404, and never named in an `ambiguous_account` answer).
    /// - Throws: `Problem` 404 `account_not_found`, 409 `ambiguous_account` with `account_ids`.
    func resolve(_ selector: SilentTokenRequest.AccountSelector, visibleTo access: KeyAccess) async throws -> AccountRecord {
        guard access.limitsTenants else { return try await resolve(selector) }
        switch selector {
        case .accountId:
            let account = try await resolve(selector)
            guard access.sees(account) else { throw Problem.accountNotFound() }
            return account
        case .homeAccountId(let home):
            return try Self.single(try await store.accounts(homeAccountId: home).filter(access.sees), "home_account_id")
        case .username(let username, let tenantId):
            return try Self.single(try await store.accounts(username: username, tenantId: tenantId).filter(access.sees), "username; narrow by tenant_id")
        }
    }

    /// The one match, or 404 / 409 `ambiguous_account` with `account_ids`.
    private static func single(_ matches: [AccountRecord], _ what: String) throws -> AccountRecord {
        guard let first = matches.first else { throw Problem.accountNotFound() }
        guard matches.count == 1 else {
            throw Problem(
                .ambiguousAccount, "Several accounts match this \(what), or pass account_id.",
                extensions: ["account_ids": .array(matches.map { .string($0.accountId) })])
        }
        return first
    }

    // MARK: Refresh

    /// Redeems the refresh token while holding the account's advisory lock, so replicas take
    /// turns and each redemption uses the token the previous one returned (strict rotation).
    /// The new access token and rotated refresh token are stored in the same transaction.
    private func refresh(
        account: AccountRecord, authority: Authority, realm: String, scopes: ScopeSet, claims: String?, mode: RefreshMode, minTTL: Int,
        context: RequestContext
    ) async throws -> RefreshOutcome {
        let store = self.store
        let clientId = self.clientId
        let sts = self.sts
        let now = self.now
        let service = self
        // What the STS answered, kept outside the transaction: if the transaction cannot commit
        // after a successful redemption, the rotated refresh token is stored again on its own.
        let redeemed = Mutex<(response: TokenResponse, token: StoredAccessToken, declined: [String], generation: Int64)?>(nil)
        do {
            return try await transactionalRefresh()
        } catch {
            guard let (response, token, declined, generation) = redeemed.withLock({ $0 }) else { throw error }
            try await persistRotation(response, accountId: account.accountId, replacing: generation, after: error)
            return .token(token, declined: declined, source: .refresh)
        }

        @Sendable func transactionalRefresh() async throws -> RefreshOutcome {
            try await store.database.transaction { connection -> RefreshOutcome in
                let lockStarted = Date()
                try TokenStore.lockRefresh(in: connection, accountId: account.accountId, clientId: clientId)
                service.metrics.observe("tokenrelay_refresh_lock_wait_seconds", seconds: Date().timeIntervalSince(lockStarted))
                if mode != .bypass {
                    // Another replica may have refreshed while this one waited for the lock.
                    let stored = try store.accessTokens(in: connection, accountId: account.accountId, environment: account.environment, realm: realm)
                    if let hit = service.best(stored, covering: scopes, minTTL: minTTL, acceptRefreshDue: mode == .cacheFirst) {
                        return .token(hit, declined: [], source: .cache)
                    }
                }
                guard var refreshToken = try store.refreshToken(in: connection, accountId: account.accountId) else {
                    return .problem(
                        Problem(
                            .interactionRequired, "No refresh token is stored for this account; the user must sign in.",
                            extensions: ["account_state": .string("active")]))
                }
                if let pending = service.pendingRotations.token(for: account.accountId, replacing: refreshToken.generation) {
                    // The stored token was superseded by a rotation not yet stored: redeem the newest.
                    refreshToken.token = pending
                }
                let result = try sts.redeemWaiting(
                    refreshToken: refreshToken.token, authority: authority, scopes: scopes, claims: claims, context: context, account: account.accountId)
                switch result {
                case .failure(.unavailable(let problem)):
                    return .problem(problem)
                case .failure(.rejected(let failure)):
                    if failure.disposition == .refreshTokenDead {
                        // Persist the deletion before answering, so the dead token is never sent again.
                        try store.markRefreshTokenDead(
                            in: connection, accountId: account.accountId, generation: refreshToken.generation, stsErrorCodes: failure.stsErrorCodes)
                        service.logger.info(
                            "account.interaction_required",
                            ["account.id": account.accountId, "sts.error_codes": failure.stsErrorCodes.map(String.init).joined(separator: ",")])
                    }
                    return .problem(Problem(failure, requestedScopes: scopes))
                case .success(let response):
                    let granted = ScopeRules.granted(response.scope, requested: scopes)
                    let declined = ScopeRules.declined(requested: scopes, granted: granted)
                    let token = StoredAccessToken(
                        response, accountId: account.accountId, environment: account.environment, realm: realm, clientId: clientId,
                        scopes: granted.canonical, issuedAt: now())
                    redeemed.withLock { $0 = (response, token, declined, refreshToken.generation) }
                    // The rotated refresh token is written first: the old one may already be
                    // superseded at the STS, so losing the new one would lose the account. Never
                    // store a null over a stored refresh token (case 14).
                    if let rotated = response.refreshToken, !rotated.isEmpty {
                        try store.saveRefreshToken(
                            in: connection, accountId: account.accountId, token: rotated, familyId: response.foci, replacing: refreshToken.generation)
                    }
                    // A cache write that fails must not take the rotation down with it.
                    do {
                        try connection.execute("SAVEPOINT cache_access_token")
                        try store.saveAccessToken(in: connection, token)
                        try connection.execute("RELEASE SAVEPOINT cache_access_token")
                    } catch {
                        try connection.execute("ROLLBACK TO SAVEPOINT cache_access_token")
                        service.logger.error("token.cache_write_failed", ["account.id": account.accountId, "error": String(describing: error)])
                    }
                    if mode == .bypass && ClaimsRequest.bypassesCache(claims: claims) {
                        // A claims challenge: other replicas must stop serving the token it rejected.
                        try ReplicaNotifications.send(.accessTokensReplaced(account.accountId), in: connection)
                    }
                    return .token(token, declined: declined, source: .refresh)
                }
            }
        }
    }

    /// Stores a rotated refresh token whose transaction failed after the STS answered (SPEC:
    /// no refresh token dropped on a transient failure): a few short tries, each a transaction
    /// of its own under the refresh lock, replacing only the token that was sent.
    ///
    /// When the database stays unreachable, the rotation is held in ``pendingRotations`` (this
    /// replica's refreshes redeem it rather than the superseded stored token) and a background
    /// task keeps trying for `persistWindowSeconds`; the caller still gets its token.
    /// - Throws: the original error when the stored token changed meanwhile in a way that is
    ///   not a database outage (the rotation is then logged as lost).
    func persistRotation(_ response: TokenResponse, accountId: String, replacing generation: Int64, after original: any Error) async throws {
        guard let rotated = response.refreshToken, !rotated.isEmpty else { return }
        let store = self.store
        let clientId = self.clientId
        @Sendable func tryStoring() async -> Bool? {
            do {
                try await store.database.transaction { connection in
                    try TokenStore.lockRefresh(in: connection, accountId: accountId, clientId: clientId)
                    try store.saveRefreshToken(in: connection, accountId: accountId, token: rotated, familyId: response.foci, replacing: generation)
                }
                return true
            } catch let problem as Problem where problem.code == .upstreamUnavailable {
                return nil  // the database is still away: try again
            } catch {
                return false  // a newer token is stored, or the row is gone: nothing to store
            }
        }
        for delay in [0.1, 0.4, 1.0] {
            switch await tryStoring() {
            case true?:
                logger.warn("token.rotation_stored_on_retry", ["account.id": accountId])
                return
            case false?:
                logger.error("token.rotation_lost", ["account.id": accountId, "error": String(describing: type(of: original))])
                throw original
            case nil:
                try? await Task.sleep(for: .seconds(delay))
            }
        }
        let pending = pendingRotations
        pending.hold(.init(token: rotated, replacing: generation), accountId: accountId)
        logger.warn("token.rotation_pending", ["account.id": accountId])
        let logger = self.logger
        Task {
            let until = Date().addingTimeInterval(pending.persistWindowSeconds)
            var outcome: Bool?
            while outcome == nil && Date() < until {
                try? await Task.sleep(for: .milliseconds(250))
                outcome = await tryStoring()
            }
            pending.release(accountId: accountId, replacing: generation)
            switch outcome {
            case true?: logger.warn("token.rotation_stored_on_retry", ["account.id": accountId])
            // A refresh of this replica redeemed the held token and stored its successor.
            case false?: logger.info("token.rotation_superseded", ["account.id": accountId])
            case nil: logger.error("token.rotation_lost", ["account.id": accountId])
            }
        }
    }

    /// The authority to redeem at and the realm whose tokens it yields (SPEC §1, §12 Accounts:
    /// access tokens are kept per realm). Another tenant of the same cloud is a separate realm (a
    /// guest account); another cloud is not this account's.
    /// - Throws: `Problem` 400 `invalid_authority` when the authority's environment is not the account's.
    func authorityAndRealm(_ requested: Authority?, for account: AccountRecord) throws -> (Authority, String) {
        guard let requested else {
            do {
                return (try authorities.validate(account.authority), account.realm)
            } catch {
                // Trust in that authority was withdrawn (configuration changed): only a new sign-in
                // through an accepted authority can help.
                throw Problem(
                    .interactionRequired, "The account's authority is no longer accepted (\(error.detail)); sign the user in again.",
                    extensions: ["account_state": .string(account.state.rawValue)])
            }
        }
        guard requested.environment == account.environment else {
            throw Problem(
                .invalidAuthority, "The account belongs to \(account.environment); this authority is in \(requested.environment).",
                extensions: ["field": .string("authority")])
        }
        // The account's own tenant, however it is written (domain or GUID, with or without `tfp`),
        // is the account's realm: one cache partition per tenant.
        let ownTenant = (try? authorities.validate(account.authority))?.tenant
        if requested.isMultiTenant || requested.tenant.caseInsensitiveCompare(ownTenant ?? "") == .orderedSame
            || requested.tenant.caseInsensitiveCompare(account.realm) == .orderedSame
        {
            return (requested, account.realm)
        }
        return (requested, requested.tenant.lowercased())
    }

    // MARK: After a cache hit

    /// Work a served cache hit may start, never awaited by the caller: one background refresh
    /// once `refresh_on` has passed (SPEC §1 proactive refresh; the cached token is served
    /// meanwhile), and `last_used_at` at most once per 5 minutes (SPEC §12 Accounts).
    private func served(_ token: StoredAccessToken, account: AccountRecord, scopes: ScopeSet, authority: Authority? = nil, claims: String? = nil) {
        touch(account.accountId)
        guard TokenFreshness.evaluate(token.times, now: now(), expirySkew: expirySkewSeconds, minTTL: 0) == .refreshDue else { return }
        // The server-thread path has no merged claims yet; both paths must build the same key.
        let claims = claims ?? (try? ClaimsRequest.merged(claims: nil, capabilities: clientCapabilities)) ?? nil
        let key = [account.accountId, token.realm, scopes.cacheKey, claims ?? "", RefreshMode.proactive.rawValue].joined(separator: "|")
        guard !coalescer.isRunning(key) else { return }
        let service = self
        Task {
            guard let authority = try? authority ?? service.authorities.validate(account.authority) else { return }
            let context = RequestContext(
                correlationId: AppHTTPHandler.newCorrelationId(), deadline: Date().addingTimeInterval(30), caller: nil, access: .unrestricted)
            do {
                let (outcome, _) = try await service.coalescer.run(key: key) {
                    try await service.refresh(
                        account: account, authority: authority, realm: token.realm, scopes: scopes, claims: claims, mode: .proactive, minTTL: 0,
                        context: context)
                }
                switch outcome {
                case .token(let fresh, _, _):
                    service.memory.store(fresh, now: service.now())
                case .problem(let problem):
                    if problem.extensions["account_state"] == .string("interaction_required") {
                        service.forgetInMemory(account.accountId)
                    }
                    service.logger.info("token.proactive_refresh_failed", ["account.id": account.accountId, "error": problem.code.rawValue])
                }
            } catch {
                service.logger.warn("token.proactive_refresh_failed", ["account.id": account.accountId, "error": String(describing: type(of: error))])
            }
        }
    }

    /// One keep-alive redemption (SPEC §12 Time in tests): the normal refresh under the
    /// account's lock with rotation in one transaction, in the account's home realm, without
    /// marking the account used (`last_used_at` stays the caller's).
    /// - Returns: the refresh outcome (a token, or the problem a request would have seen).
    /// - Throws: `Problem` when the account's authority is no longer accepted, or the database fails.
    func keepAliveRefresh(account: AccountRecord, scopes: ScopeSet, context: RequestContext) async throws -> RefreshOutcome {
        let (authority, realm) = try authorityAndRealm(nil, for: account)
        let claims = (try? ClaimsRequest.merged(claims: nil, capabilities: clientCapabilities)) ?? nil
        let key = [account.accountId, realm, scopes.cacheKey, claims ?? "", RefreshMode.bypass.rawValue, "0"].joined(separator: "|")
        let (outcome, _) = try await coalescer.run(key: key) {
            try await refresh(
                account: account, authority: authority, realm: realm, scopes: scopes, claims: claims, mode: .bypass, minTTL: 0,
                context: context)
        }
        switch outcome {
        case .token(let token, _, _): memory.store(token, now: now())
        case .problem(let problem) where problem.extensions["account_state"] == .string("interaction_required"): forgetInMemory(account.accountId)
        case .problem: break
        }
        return outcome
    }

    /// Drops everything this replica holds in memory for the account (deleted, signed in again,
    /// refresh token dead).
    func forgetInMemory(_ accountId: String) {
        memory.removeAll(accountId: accountId)
        accounts.remove(id: accountId)
        declinedScopes.forget(accountId: accountId)
        uiRequired.forget(accountId: accountId)
    }

    /// Records use of the account in the background when this replica has not for 5 minutes.
    private func touch(_ accountId: String) {
        guard accounts.claimTouch(id: accountId, now: now()) else { return }
        let store = self.store
        Task { try? await store.touch(accountId: accountId) }
    }

    // MARK: Freshness

    /// Served iff `expires_on − now ≥ max(expiry_skew, min_ttl)` (SPEC §12).
    func usable(_ token: StoredAccessToken, minTTL: Int) -> Bool {
        token.isServable(now: now(), expirySkew: expirySkewSeconds, minTTL: minTTL)
    }

    /// The longest-lived usable token covering `scopes`; with `acceptRefreshDue` false, only one
    /// whose `refresh_on` has not passed.
    func best(_ tokens: [StoredAccessToken], covering scopes: ScopeSet, minTTL: Int, acceptRefreshDue: Bool = true) -> StoredAccessToken? {
        tokens.best(covering: scopes, now: now(), expirySkew: expirySkewSeconds, minTTL: minTTL, acceptRefreshDue: acceptRefreshDue)
    }
}
