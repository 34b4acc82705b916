import IdentityCore
import TokenRelayBase
import TokenRelayStore
import TokenRelayUpstream

/// The one decision of how a silent-token request is answered (behaviour §2.2, §5, §12 Token
/// requests), as a value in the manner of ``RefreshStateMachine``: it is told what is known (the
/// request, the key's limits, the account, this replica's memories, cached tokens, a refresh's
/// outcome, the clock) and says what to do next: answer, refuse, or find one thing out.
///
/// Two executors run it. ``SilentAcquisition/answerFromMemory(_:owner:)`` runs on the server
/// thread and finds out only what memory holds; where memory ends it stops, and the suspended
/// step (``SilentAcquisition/acquire(continuing:context:)``) carries on from that very step
/// with PostgreSQL and the STS. Each check runs once per request, and the two steps cannot
/// disagree, because there is one plan.
///
/// The order, each step taken only once the facts before it are known:
/// 1. the key may ask for what the request names (403 `forbidden`);
/// 2. the account (404, 409 `ambiguous_account`), seen by the key (404);
/// 3. its tenant not suspended (403 `tenant_suspended`), its refresh token alive (409
///    `interaction_required`, no STS call);
/// 4. an ADAL import not yet redeemed is redeemed first, then the plan goes on with the account
///    it yields;
/// 5. the realm: the account's own, or the named authority's (400 `invalid_authority`), which
///    the key must be allowed (403);
/// 6. an interaction-required answer remembered for (realm, scopes, merged claims) is replayed
///    without a call (ADR 0008, behaviour §5.4; claims that do not merge are 400 naming `claims`);
/// 7. unless `claims` or `force_refresh` bypass the cache (§1.7): the declined-scopes memory, then
///    a token from memory, then PostgreSQL's cache. A cached token carrying scopes the key may
///    not ask for is not served (§12.20): the refresh that follows bypasses the cache;
/// 8. the authority the refresh token is redeemed at (409 when the account's own is no longer
///    accepted: a cached token needs no authority) and a refresh; when it fails because the STS
///    is unavailable, a token still inside its extended lifetime (`allow_extended_lifetime`, §5.7).
///
/// The memories of step 6 and 7 are asked only when they may hold anything (``Step/checkMemories``):
/// a cached answer builds no memory key and merges no claims.
package struct SilentPlan: Sendable {
    /// What the plan needs done next. The facts a step works on are the plan's own
    /// (``account``, ``lookup``, ``recallKey``, ``redemption``, ``failure``), and so are its
    /// decisions (``answer``, ``refusal``, ``aftermath``): a step is one word, cheap to hand over.
    package enum Step: Sendable, Equatable {
        /// Find the account `request.account` names.
        case resolveAccount
        /// Whether ``account``'s tenant (or its home tenant) is suspended.
        case checkSuspension
        /// Whether the UI-required and declined-scopes memories hold any answer (``learn(memoriesHoldUIRequired:declinedScopes:)``).
        case checkMemories
        /// Redeem ``account``'s imported refresh token, which the platform has not seen yet; then
        /// tell the plan the account again (``learn(account:storedTokens:)``) unless the redemption answered.
        case completeImport
        /// A servable token for ``lookup`` in this replica's memory (``learn(memoryHit:)``).
        case lookUpMemoryCache
        /// The declined-scopes memory under ``recallKey`` (``learn(declined:)``).
        case recallDeclinedScopes
        /// A servable token for ``lookup`` in PostgreSQL's cache; ``storedTokens`` holds the
        /// account's tokens when they came with it (``learn(storedHit:)``).
        case lookUpStoredCache
        /// The UI-required memory under ``recallKey`` (``learn(uiRequired:)``).
        case recallUIRequired
        /// Redeem the refresh token as ``redemption`` says (``learn(outcome:)``).
        case refresh
        /// A token the extended lifetime still covers, after ``failure`` (``learn(extended:)``).
        case lookUpExtendedLifetime
        /// The answer is ``answer``; ``aftermath`` is what serving it entails.
        case answer
        /// The refusal is ``refusal``; ``aftermath`` is what refusing it entails.
        case refuse
    }

    /// Which tokens a cache step looks for.
    package struct CacheLookup: Sendable {
        package let accountId: String
        package let environment: String
        package let realm: String
        package let scopes: ScopeSet
        /// `min_ttl_s`, seconds.
        package let minTTL: Int
        /// The plan's time (Unix seconds) the token must be servable at.
        package let now: Int
    }

    /// The refresh the plan asks for (a ``RefreshExecutor/Request`` once the executor adds its
    /// request context).
    package struct Redemption: Sendable {
        package let account: AccountRecord
        package let authority: Authority
        package let realm: String
        package let scopes: ScopeSet
        /// The claims sent to the STS: the caller's merged with the client capabilities.
        package let claims: String?
        package let mode: RefreshStateMachine.Mode
        package let minTTL: Int
    }

    /// What an answer or a refusal entails besides itself.
    package enum Aftermath: Sendable {
        case nothing
        /// A cached token served: count the hit, record use, and start the proactive refresh
        /// once `refresh_on` has passed (behaviour §1). `authority` is the request's, nil for the
        /// account's own; `claims` the merged claims when the request sent any.
        case servedFromCache(StoredAccessToken, layer: TokenCacheReader.Layer, authority: Authority?, claims: String?)
        /// A refresh answered: record use, and remember scopes the platform declined until the
        /// token expires (behaviour §4).
        case refreshed(StoredAccessToken, declined: [String], declinedKey: String)
        /// An interaction-required answer replayed from memory: count it.
        case replayedUIRequired
        /// An interaction-required answer the memory may replay (ADR 0008): remember it under `key`.
        case rememberUIRequired(RelayError, key: String)
    }

    /// The configuration the plan decides with: made once per ``SilentAcquisition`` and shared by
    /// every plan (a class: a plan takes it with one reference count).
    package final class Rules: Sendable {
        package let authorities: AuthorityValidator
        package let clientCapabilities: [String]
        /// `TOKENRELAY_EXPIRY_SKEW_S`, seconds.
        package let expirySkewSeconds: Int
        /// `allow_extended_lifetime` (behaviour §5).
        package let allowExtendedLifetime: Bool

        package init(authorities: AuthorityValidator, clientCapabilities: [String], expirySkewSeconds: Int, allowExtendedLifetime: Bool) {
            self.authorities = authorities
            self.clientCapabilities = clientCapabilities
            self.expirySkewSeconds = expirySkewSeconds
            self.allowExtendedLifetime = allowExtendedLifetime
        }
    }

    package let request: SilentTokenRequest
    /// The caller's tenant and scope limits (behaviour §12 Permissions).
    package let access: KeyAccess
    package let rules: Rules
    /// Unix seconds of the executor's clock, for the memories' servability checks.
    package var now: Int

    // MARK: What the current step works on, and what the plan decided

    /// The memory key of ``Step/recallDeclinedScopes`` and ``Step/recallUIRequired``.
    package private(set) var recallKey = ""
    /// The refresh of ``Step/refresh``.
    package private(set) var redemption: Redemption?
    /// The refresh's error of ``Step/lookUpExtendedLifetime``.
    package private(set) var failure: AcquisitionError?
    /// The answer of ``Step/answer``.
    package private(set) var answer: SilentTokenResult?
    /// The refusal of ``Step/refuse``.
    package private(set) var refusal: RelayError?
    /// What ``Step/answer`` or ``Step/refuse`` entails.
    package private(set) var aftermath = Aftermath.nothing

    /// The tokens a cache step looks for: the account's, in the realm worked out.
    package var lookup: CacheLookup {
        CacheLookup(
            accountId: account?.accountId ?? "", environment: account?.environment ?? "", realm: realm ?? "", scopes: request.scopes,
            minTTL: request.minTTLSeconds, now: now)
    }

    /// The account's stored tokens read with it, when they are of the realm looked in.
    package var storedTokensRead: [StoredAccessToken]? { realm == account?.realm ? storedTokens : nil }

    // MARK: Facts, in the order the plan learns them

    private var requestChecked = false
    /// The account, once found.
    package private(set) var account: AccountRecord?
    private var storedTokens: [StoredAccessToken]?
    private var accountSeen = false
    private var suspension: Suspension?
    private var realm: String?
    /// The authority to redeem at: the request's once its realm is known, the account's own
    /// validated only when the STS is needed (a cached token needs no authority).
    private var authority: Authority?
    private var mergedClaims: MergedClaims?
    private var memoriesHold: MemoriesHold?
    private var declined = DeclinedState.unread
    private var cache = CacheState.unread
    /// A cached token carried scopes the key may not ask for: no cache answer, and the refresh
    /// bypasses the cache for the key's own scopes (behaviour §12.20).
    private var exceedsKey = false
    private var uiRequired = UIRequiredState.unread
    private var outcome: RefreshExecutor.Outcome?
    private var extended: ExtendedState = .unread

    private enum Suspension {
        case none
        case suspended(tenant: String)
    }

    private struct MergedClaims {
        let text: String?
    }

    private struct MemoriesHold {
        let uiRequired: Bool
        let declinedScopes: Bool
    }

    private enum DeclinedState {
        case unread
        case read(DeclinedScopesMemory.Answer?)
    }

    private enum CacheState {
        case unread
        case hit(MemoryTokenCache.Hit?, StoredAccessToken, TokenCacheReader.Layer)
        case memoryMissed
        case storedMissed
    }

    private enum UIRequiredState {
        case unread
        case replay(RelayError)
        case none
    }

    private enum ExtendedState {
        case unread
        case read(StoredAccessToken?)
    }

    package init(request: SilentTokenRequest, access: KeyAccess, rules: Rules, now: Int) {
        self.request = request
        self.access = access
        self.rules = rules
        self.now = now
    }

    // MARK: What the executors tell it

    /// The account the request names (again, after an import: every fact about the previous
    /// account is dropped) and, when they were read with it, its stored access tokens in its own
    /// realm (``AccountResolver/byAccountId(_:owner:readingTokens:)``).
    package mutating func learn(account: AccountRecord, storedTokens: [StoredAccessToken]?) {
        self.account = account
        self.storedTokens = storedTokens
        accountSeen = false
        suspension = nil
        realm = nil
        authority = nil
        memoriesHold = nil
        declined = .unread
        cache = .unread
        exceedsKey = false
        uiRequired = .unread
        outcome = nil
        extended = .unread
    }

    /// The suspended tenant of the account, or nil (``TenantSuspensions/suspendedTenant(of:)``).
    package mutating func learn(suspendedTenant: String?) {
        suspension = suspendedTenant.map { .suspended(tenant: $0) } ?? Suspension.none
    }

    /// Whether this replica's UI-required and declined-scopes memories hold any answer
    /// (``Step/checkMemories(accountId:)``); false skips their steps.
    package mutating func learn(memoriesHoldUIRequired uiRequired: Bool, declinedScopes: Bool) {
        memoriesHold = MemoriesHold(uiRequired: uiRequired, declinedScopes: declinedScopes)
    }

    /// What memory holds for ``Step/lookUpMemoryCache(_:)``: a servable token, or nil.
    package mutating func learn(memoryHit: MemoryTokenCache.Hit?) {
        cache = memoryHit.map { .hit($0, $0.token, .memory) } ?? .memoryMissed
    }

    /// What the declined-scopes memory holds for ``Step/recallDeclinedScopes(accountId:key:)``.
    package mutating func learn(declined remembered: DeclinedScopesMemory.Answer?) {
        declined = .read(remembered)
    }

    /// What PostgreSQL's cache holds for ``Step/lookUpStoredCache(_:read:)``: a servable token, or nil.
    package mutating func learn(storedHit: StoredAccessToken?) {
        cache = storedHit.map { .hit(nil, $0, .database) } ?? .storedMissed
    }

    /// The remembered answer for ``Step/recallUIRequired(accountId:key:)``, or nil.
    package mutating func learn(uiRequired remembered: RelayError?) {
        uiRequired = remembered.map(UIRequiredState.replay) ?? UIRequiredState.none
    }

    /// How the refresh of ``Step/refresh(_:)`` ended.
    package mutating func learn(outcome: RefreshExecutor.Outcome) {
        self.outcome = outcome
    }

    /// The token of ``Step/lookUpExtendedLifetime(_:_:)``, or nil.
    package mutating func learn(extended token: StoredAccessToken?) {
        extended = .read(token)
    }

    // MARK: The decision

    /// The next step. Pure: it reads only what the plan was told. Asked again before the step's
    /// fact is learnt, it names the same step (the suspended step carries on from there); what it
    /// worked out on the way (the realm, the merged claims) is kept, not worked out again.
    package mutating func next() -> Step {
        if !requestChecked {
            requestChecked = true
            do { try access.check(request) } catch { return refuse(error) }
        }
        guard let account else { return .resolveAccount }
        if !accountSeen {
            guard access.sees(account) else { return refuse(RelayError.accountNotFound()) }
            accountSeen = true
        }
        guard let suspension else { return .checkSuspension }
        if case .suspended(let tenant) = suspension { return refuse(TenantSuspensions.problem(tenant)) }
        // A pattern, not `==`: the enum's `Equatable` was called through its protocol witness.
        guard case .active = account.state else { return refuse(Self.deadRefreshToken(account, request: request)) }
        if account.awaitsFirstRedemption { return .completeImport }

        if realm == nil {
            if let requested = request.authority {
                do {
                    let (authority, realm) = try rules.authorities.authorityAndRealm(requested, for: account)
                    (self.authority, self.realm) = (authority, realm)
                } catch {
                    return refuse(Self.relayError(error))
                }
            } else {
                realm = account.realm
            }
            // A key that sees a guest through another tenant's profile gets no home-tenant token.
            do { try access.check(realm: realm!) } catch { return refuse(error) }
        }
        let realm = self.realm!

        guard let memoriesHold else { return .checkMemories }
        if memoriesHold.uiRequired, case .unread = uiRequired {
            let claims: String?
            do { claims = try merged().text } catch { return refuse(error) }
            recallKey = UIRequiredMemory.key(realm: realm, scopesKey: request.scopes.cacheKey, claims: claims)
            return .recallUIRequired
        }
        if case .replay(let remembered) = uiRequired { return refuse(remembered, after: .replayedUIRequired) }

        if !request.bypassesCache && !exceedsKey {
            if memoriesHold.declinedScopes, case .unread = declined {
                recallKey = DeclinedScopesMemory.key(realm: realm, scopes: request.scopes)
                return .recallDeclinedScopes
            }
            if case .read(let remembered?) = declined,
                remembered.token.isServable(now: now, expirySkew: rules.expirySkewSeconds, minTTL: request.minTTLSeconds)
            {
                if access.allows(remembered.token) {
                    return answer(remembered.token, declined: remembered.declined, account: account, source: .cache, after: .nothing)
                }
                exceedsKey = true
            }
        }
        if !request.bypassesCache && !exceedsKey {
            switch cache {
            case .unread:
                return .lookUpMemoryCache
            case .hit(let memoryHit, let token, let layer):
                if access.allows(token) {
                    let claims = request.claims == nil ? nil : try? merged().text
                    let result = SilentTokenResult(token: token, account: account, source: .cache, declinedScopes: [], prebuiltAnswer: memoryHit?.answer)
                    return decide(result, after: .servedFromCache(token, layer: layer, authority: authority, claims: claims))
                }
                exceedsKey = true
            case .memoryMissed:
                return .lookUpStoredCache
            case .storedMissed:
                break
            }
        }

        if authority == nil {
            // The account's own authority, needed now that the STS is.
            do { authority = try rules.authorities.authorityAndRealm(nil, for: account).0 } catch { return refuse(Self.relayError(error)) }
        }
        let claims: String?
        do { claims = try merged().text } catch { return refuse(error) }
        guard let outcome else {
            redemption = Redemption(
                account: account, authority: authority!, realm: realm, scopes: request.scopes, claims: claims,
                mode: request.bypassesCache || exceedsKey ? .bypass : .cacheFirst, minTTL: request.minTTLSeconds)
            return .refresh
        }
        switch outcome {
        case .failure(let error):
            if rules.allowExtendedLifetime, !request.bypassesCache, error.stsUnavailable {
                switch extended {
                case .unread:
                    failure = error
                    return .lookUpExtendedLifetime
                case .read(let token?) where access.allows(token):
                    let result = SilentTokenResult(token: token, account: account, source: .cache, declinedScopes: [], extendedLifetime: true)
                    return decide(result, after: .nothing)
                case .read:
                    break
                }
            }
            var problem = RelayError(error, requestedScopes: request.scopes)
            if problem.code == .interactionRequired {
                problem.signInHint = SignInHint(
                    account: account, scopes: request.scopes.canonical, claims: SignInHint.claims(for: problem, requested: request.claims),
                    authority: request.authority?.url)
            }
            guard problem.replayable else { return refuse(problem, after: .nothing) }
            // The memory's key made only for an answer it keeps: the plan passes here before the
            // refresh and after it, and a token needs none.
            let key = UIRequiredMemory.key(realm: realm, scopesKey: request.scopes.cacheKey, claims: claims)
            return refuse(problem, after: .rememberUIRequired(problem, key: key))
        case .token(let token, let declined, let source):
            let after = Aftermath.refreshed(token, declined: declined, declinedKey: DeclinedScopesMemory.key(realm: realm, scopes: request.scopes))
            // The platform may grant more than was asked (scopes consented earlier): such a token
            // is kept for callers who may have it, never handed to this key.
            do { try access.check(served: token) } catch { return refuse(error, after: after) }
            return answer(token, declined: declined, account: account, source: source, after: after)
        }
    }

    /// The answer of ``answer(_:declined:account:source:allowPartial:)`` as a step.
    private mutating func answer(
        _ token: StoredAccessToken, declined: [String], account: AccountRecord, source: SilentTokenResult.Source, after: Aftermath
    ) -> Step {
        do {
            return decide(try Self.answer(token, declined: declined, account: account, source: source, allowPartial: request.allowPartial), after: after)
        } catch {
            return refuse(error, after: after)
        }
    }

    /// The answer of ``Step/answer``, moved out of the plan (the plan is done with it: its copy
    /// and release were a share of a cached answer, behaviour §10).
    package mutating func takeAnswer() -> SilentTokenResult? {
        answer.take()
    }

    private mutating func decide(_ result: consuming SilentTokenResult, after: consuming Aftermath) -> Step {
        (answer, aftermath) = (result, after)
        return .answer
    }

    private mutating func refuse(_ error: RelayError, after: Aftermath = .nothing) -> Step {
        (refusal, aftermath) = (error, after)
        return .refuse
    }

    /// The token, or 409 `server_declined_scopes` when scopes were declined and the caller did not
    /// accept a partial grant (behaviour §4).
    package static func answer(
        _ token: StoredAccessToken, declined: [String], account: AccountRecord, source: SilentTokenResult.Source, allowPartial: Bool
    ) throws(RelayError) -> SilentTokenResult {
        guard declined.isEmpty || allowPartial else {
            throw RelayError(
                .serverDeclinedScopes, "The identity provider granted fewer scopes than requested.",
                extensions: [
                    "granted_scopes": .array(token.scopes.map(JSONValue.string)),
                    "declined_scopes": .array(declined.map(JSONValue.string)),
                ])
        }
        return SilentTokenResult(token: token, account: account, source: source, declinedScopes: declined)
    }

    /// The caller's claims merged with the client capabilities (the STS `claims` parameter),
    /// merged once per plan.
    private mutating func merged() throws(RelayError) -> MergedClaims {
        if let mergedClaims { return mergedClaims }
        let merged = MergedClaims(text: try Self.mergedClaims(request.claims, capabilities: rules.clientCapabilities))
        mergedClaims = merged
        return merged
    }

    /// `claims` merged with the client capabilities (the STS `claims` parameter).
    /// - Throws: `RelayError` 400 `invalid_request` field `claims` when they are not a JSON object.
    package static func mergedClaims(_ claims: String?, capabilities: [String]) throws(RelayError) -> String? {
        do {
            return try ClaimsRequest.merged(claims: claims, capabilities: capabilities)
        } catch {
            throw RelayError.invalidRequest(field: "claims", "'claims' must be a JSON object, as JSON text or base64.")
        }
    }

    private static func relayError(_ error: any Error) -> RelayError {
        error as? RelayError ?? RelayError(.internal, "The authority could not be checked.")
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
