import Foundation
import IdentityCore
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayDownstream
import TokenRelayStore
import TokenRelayUpstream

/// The one silent decision (``SilentPlan``) walked without sockets or a database: each row gives
/// what the executors would find out (the account, memories, cached tokens, a refresh's outcome)
/// and names the steps the plan takes and how it ends.
@Suite("Silent acquisition: the silent plan")
struct SilentPlanTests {
    static let now = 1_800_000_000
    static let tenant = "11111111-1111-1111-1111-111111111111"
    static let graphUserRead = "https://graph.microsoft.com/User.Read"

    /// What the walk answers each step with; nil where the executor would find nothing.
    struct World {
        var account: AccountRecord? = SilentPlanTests.account()
        var suspendedTenant: String?
        var memoryHit: StoredAccessToken?
        var declined: DeclinedScopesMemory.Answer?
        var storedHit: StoredAccessToken?
        var uiRequired: RelayError?
        var outcome: RefreshExecutor.Outcome?
        var extended: StoredAccessToken?
        /// The account an import's redemption yields (the plan starts over with it).
        var imported: AccountRecord?
    }

    /// How the walk ended and the steps on the way, by name.
    struct Walk {
        var steps: [String] = []
        var result: SilentTokenResult?
        var refusal: RelayError?
        var aftermath: SilentPlan.Aftermath?
        var redemption: SilentPlan.Redemption?
    }

    static func account(
        state: AccountRecord.State = .active, homeAccountId: String? = "oid.\(tenant)", authority: String = "https://login.microsoftonline.com/\(tenant)"
    ) -> AccountRecord {
        AccountRecord(
            accountId: "acc_1", clientId: "client", environment: "login.microsoftonline.com", homeAccountId: homeAccountId, realm: tenant,
            localAccountId: "oid", username: "alice@contoso.example", name: "Alice", authority: authority, authorityType: .aad, state: state,
            idTokenClaims: "{}", createdAt: "2026-01-01T00:00:00Z", lastUsedAt: nil)
    }

    static func token(scopes: [String] = [graphUserRead], expiresIn: Int = 3600, extExpiresIn: Int? = nil) -> StoredAccessToken {
        StoredAccessToken(
            accountId: "acc_1", environment: "login.microsoftonline.com", realm: tenant, clientId: "client", scopes: scopes, secret: "at",
            expiresOn: now + expiresIn, extExpiresOn: extExpiresIn.map { now + $0 }, refreshOn: nil)
    }

    static func request(
        scopes: [String] = ["User.Read"], claims: String? = nil, forceRefresh: Bool = false, allowPartial: Bool = false, authority: String? = nil
    ) -> SilentTokenRequest {
        SilentTokenRequest(
            account: .accountId("acc_1"), scopes: ScopeSet(normalizing: scopes), authority: authority.map { try! authorities.validate($0) },
            claims: claims, forceRefresh: forceRefresh, allowPartial: allowPartial)
    }

    static let authorities = try! AuthorityValidator(knownAuthorities: [], allowHTTPLoopback: false)

    static func plan(_ request: SilentTokenRequest, access: KeyAccess = .unrestricted, extendedLifetime: Bool = false) -> SilentPlan {
        SilentPlan(
            request: request, access: access,
            rules: SilentPlan.Rules(authorities: authorities, clientCapabilities: ["cp1"], expirySkewSeconds: 300, allowExtendedLifetime: extendedLifetime),
            now: now)
    }

    static func failure(status: Int, _ body: String) -> AcquisitionError {
        .rejected(STSErrorMapping.classify(status: status, headers: [], body: Array(body.utf8), now: Date(timeIntervalSince1970: Double(now))))
    }

    /// Runs `plan` to its end against `world`; `memoryOnly` stops where the server thread stops.
    static func walk(_ plan: inout SilentPlan, _ world: World, memoryOnly: Bool = false) -> Walk {
        var walk = Walk()
        var world = world
        for _ in 0..<20 {
            let step = plan.next()
            switch step {
            case .resolveAccount:
                walk.steps.append("resolveAccount")
                guard let account = world.account else { return walk }
                plan.learn(account: account, storedTokens: nil)
            case .checkSuspension:
                walk.steps.append("checkSuspension")
                plan.learn(suspendedTenant: world.suspendedTenant)
            case .checkMemories:
                walk.steps.append("checkMemories")
                plan.learn(memoriesHoldUIRequired: world.uiRequired != nil, declinedScopes: world.declined != nil)
            case .completeImport:
                walk.steps.append("completeImport")
                if memoryOnly { return walk }
                guard let imported = world.imported else { return walk }
                world.imported = nil
                plan.learn(account: imported, storedTokens: nil)
            case .lookUpMemoryCache:
                walk.steps.append("lookUpMemoryCache")
                plan.learn(memoryHit: world.memoryHit.map { MemoryTokenCache.Hit(token: $0, answer: TokenAnswerBytes(cached: $0)) })
            case .recallDeclinedScopes:
                walk.steps.append("recallDeclinedScopes")
                plan.learn(declined: world.declined)
            case .lookUpStoredCache:
                walk.steps.append("lookUpStoredCache")
                if memoryOnly { return walk }
                plan.learn(storedHit: world.storedHit)
            case .recallUIRequired:
                walk.steps.append("recallUIRequired")
                plan.learn(uiRequired: world.uiRequired)
            case .refresh:
                walk.steps.append("refresh")
                walk.redemption = plan.redemption
                if memoryOnly { return walk }
                guard let outcome = world.outcome else { return walk }
                plan.learn(outcome: outcome)
            case .lookUpExtendedLifetime:
                walk.steps.append("lookUpExtendedLifetime")
                plan.learn(extended: world.extended)
            case .answer:
                walk.steps.append("answer")
                (walk.result, walk.aftermath) = (plan.answer, plan.aftermath)
                return walk
            case .refuse:
                walk.steps.append("refuse")
                (walk.refusal, walk.aftermath) = (plan.refusal, plan.aftermath)
                return walk
            }
        }
        Issue.record("the plan did not end in 20 steps")
        return walk
    }

    static func walk(_ request: SilentTokenRequest, _ world: World, access: KeyAccess = .unrestricted, extendedLifetime: Bool = false) -> Walk {
        var plan = plan(request, access: access, extendedLifetime: extendedLifetime)
        return walk(&plan, world)
    }

    // MARK: Refusals before any cache

    @Test("A scope the key may not ask for is 403 before the account is looked for")
    func keyLimitsFirst() {
        let walk = Self.walk(Self.request(scopes: ["Mail.Read"]), World(), access: KeyAccess(scopePatterns: ["https://graph.microsoft.com/User.*"]))
        #expect(walk.steps == ["refuse"])
        #expect(walk.refusal?.code == .forbidden)
    }

    @Test("An account outside the key's tenants is 404, as if it did not exist")
    func accountNotSeen() {
        let walk = Self.walk(Self.request(), World(), access: KeyAccess(tenants: ["22222222-2222-2222-2222-222222222222"]))
        #expect(walk.steps == ["resolveAccount", "refuse"])
        #expect(walk.refusal?.code == .accountNotFound)
    }

    @Test("A suspended tenant is 403 tenant_suspended before any cache, even with a token in memory")
    func suspendedTenant() {
        let walk = Self.walk(Self.request(), World(suspendedTenant: Self.tenant, memoryHit: Self.token()))
        #expect(walk.steps == ["resolveAccount", "checkSuspension", "refuse"])
        #expect(walk.refusal?.code == .tenantSuspended)
    }

    @Test("A dead refresh token is interaction_required with a sign-in hint and no STS call, even with a token in memory")
    func deadAccount() {
        let walk = Self.walk(Self.request(), World(account: Self.account(state: .interactionRequired), memoryHit: Self.token()))
        #expect(walk.steps == ["resolveAccount", "checkSuspension", "refuse"])
        #expect(walk.refusal?.code == .interactionRequired)
        #expect(walk.refusal?.extensions["account_state"] == .string("interaction_required"))
        #expect(walk.refusal?.signInHint?.loginHint == "alice@contoso.example")
    }

    @Test("An import not yet redeemed is redeemed first; the plan then goes on with the account it yields")
    func pendingImport() {
        let walk = Self.walk(
            Self.request(), World(account: Self.account(homeAccountId: nil), memoryHit: Self.token(), imported: Self.account()))
        #expect(walk.steps == ["resolveAccount", "checkSuspension", "completeImport", "checkSuspension", "checkMemories", "lookUpMemoryCache", "answer"])
        #expect(walk.result?.source == .cache)
    }

    @Test("An authority of another cloud is 400 invalid_authority naming authority, before any cache")
    func otherCloud() {
        let walk = Self.walk(Self.request(authority: "https://login.microsoftonline.us/\(Self.tenant)"), World(memoryHit: Self.token()))
        #expect(walk.steps == ["resolveAccount", "checkSuspension", "refuse"])
        #expect(walk.refusal?.code == .invalidAuthority)
        #expect(walk.refusal?.extensions["field"] == .string("authority"))
    }

    @Test("A key that sees a guest through another tenant gets no token of the account's home tenant (403 on authority)")
    func realmOutsideKey() {
        let guest = AccountRecord(
            accountId: "acc_1", clientId: "client", environment: "login.microsoftonline.com", homeAccountId: "oid.\(Self.tenant)", realm: Self.tenant,
            localAccountId: "oid", username: "erin@contoso.example", name: "Erin", authority: "https://login.microsoftonline.com/\(Self.tenant)",
            authorityType: .aad, state: .active, idTokenClaims: "{}", createdAt: "2026-01-01T00:00:00Z", lastUsedAt: nil,
            tenantProfiles: [
                TenantProfile(realm: Self.tenant, localAccountId: "oid", isHome: true),
                TenantProfile(realm: "22222222-2222-2222-2222-222222222222", localAccountId: "guest", isHome: false),
            ])
        let walk = Self.walk(
            Self.request(), World(account: guest, memoryHit: Self.token()), access: KeyAccess(tenants: ["22222222-2222-2222-2222-222222222222"]))
        #expect(walk.steps == ["resolveAccount", "checkSuspension", "refuse"])
        #expect(walk.refusal?.code == .forbidden)
        #expect(walk.refusal?.extensions["field"] == .string("authority"))
    }

    // MARK: The cache

    @Test("A token in memory is served with its prebuilt answer; a hit counted and use recorded, no authority or claims worked out")
    func memoryHit() throws {
        let walk = Self.walk(Self.request(), World(memoryHit: Self.token()))
        #expect(walk.steps == ["resolveAccount", "checkSuspension", "checkMemories", "lookUpMemoryCache", "answer"])
        let result = try #require(walk.result)
        #expect(result.source == .cache)
        #expect(result.prebuiltAnswer != nil)
        guard case .servedFromCache(_, .memory, nil, nil)? = walk.aftermath else {
            Issue.record("expected servedFromCache from memory, got \(String(describing: walk.aftermath))")
            return
        }
    }

    @Test("A cached token serves even when the account's own authority is no longer accepted; only a refresh needs it")
    func cacheBeforeAuthority() {
        let withdrawn = Self.account(authority: "https://login.example.invalid/\(Self.tenant)")
        #expect(Self.walk(Self.request(), World(account: withdrawn, memoryHit: Self.token())).result?.source == .cache)
        let refused = Self.walk(Self.request(), World(account: withdrawn))
        #expect(refused.steps == ["resolveAccount", "checkSuspension", "checkMemories", "lookUpMemoryCache", "lookUpStoredCache", "refuse"])
        #expect(refused.refusal?.code == .interactionRequired)
    }

    @Test("A cached token with scopes the key may not ask for is not served: the refresh bypasses the cache for the key's scopes")
    func cachedTokenExceedsKey() {
        let wide = Self.token(scopes: [Self.graphUserRead, "https://graph.microsoft.com/Mail.Read"])
        let walk = Self.walk(Self.request(), World(memoryHit: wide), access: KeyAccess(scopePatterns: ["https://graph.microsoft.com/User.*"]))
        #expect(walk.steps == ["resolveAccount", "checkSuspension", "checkMemories", "lookUpMemoryCache", "refresh"])
        #expect(walk.redemption?.mode == .bypass)
    }

    @Test("Declined scopes remembered: the partial token when allow_partial, else 409 server_declined_scopes; no STS call, no cache read")
    func declinedRemembered() {
        let granted = Self.token(scopes: [Self.graphUserRead])
        let world = World(declined: DeclinedScopesMemory.Answer(token: granted, declined: ["https://graph.microsoft.com/Mail.Read"]))
        let partial = Self.walk(Self.request(scopes: ["User.Read", "Mail.Read"], allowPartial: true), world)
        #expect(partial.steps == ["resolveAccount", "checkSuspension", "checkMemories", "recallDeclinedScopes", "answer"])
        #expect(partial.result?.declinedScopes == ["https://graph.microsoft.com/Mail.Read"])
        let strict = Self.walk(Self.request(scopes: ["User.Read", "Mail.Read"]), world)
        #expect(strict.refusal?.code == .serverDeclinedScopes)
    }

    @Test("A declined-scopes answer whose token is no longer servable is passed over for PostgreSQL's cache")
    func declinedExpired() {
        let expiring = Self.token(expiresIn: 60)
        let walk = Self.walk(
            Self.request(), World(declined: DeclinedScopesMemory.Answer(token: expiring, declined: ["x"]), storedHit: Self.token()))
        #expect(
            walk.steps == ["resolveAccount", "checkSuspension", "checkMemories", "recallDeclinedScopes", "lookUpMemoryCache", "lookUpStoredCache", "answer"])
        guard case .servedFromCache(_, .database, _, _)? = walk.aftermath else {
            Issue.record("expected a database hit, got \(String(describing: walk.aftermath))")
            return
        }
    }

    @Test("force_refresh and claims beyond capabilities skip every cache step and redeem bypassing the cache")
    func bypass() {
        let forced = Self.walk(Self.request(forceRefresh: true), World(memoryHit: Self.token()))
        #expect(forced.steps == ["resolveAccount", "checkSuspension", "checkMemories", "refresh"])
        #expect(forced.redemption?.mode == .bypass)
        let challenged = Self.walk(Self.request(claims: #"{"access_token":{"nbf":{"essential":true,"value":"1"}}}"#), World(memoryHit: Self.token()))
        #expect(challenged.redemption?.mode == .bypass)
        #expect(challenged.redemption?.claims?.contains("cp1") == true)
    }

    @Test("Claims that are not a JSON object are 400 naming claims, before the STS")
    func badClaims() {
        let walk = Self.walk(Self.request(claims: "not json"), World())
        #expect(walk.steps == ["resolveAccount", "checkSuspension", "checkMemories", "refuse"])
        #expect(walk.refusal?.extensions["field"] == .string("claims"))
    }

    // MARK: The refresh

    @Test("A remembered interaction-required answer is replayed before the cache (behaviour §2.2 step 4), counted as replayed")
    func uiRequiredReplay() {
        var remembered = RelayError(.interactionRequired, "MFA")
        remembered.replayable = true
        let walk = Self.walk(Self.request(), World(memoryHit: Self.token(), uiRequired: remembered))
        #expect(walk.steps == ["resolveAccount", "checkSuspension", "checkMemories", "recallUIRequired", "refuse"])
        #expect(walk.refusal?.detail == "MFA")
        guard case .replayedUIRequired? = walk.aftermath else {
            Issue.record("expected replayedUIRequired, got \(String(describing: walk.aftermath))")
            return
        }
    }

    @Test("Nothing cached: one refresh, cache first, with the merged claims; its token answered and remembered as used")
    func refreshAnswers() throws {
        let fresh = Self.token()
        let walk = Self.walk(Self.request(), World(outcome: .token(fresh, declined: [], source: .refresh)))
        #expect(
            walk.steps == ["resolveAccount", "checkSuspension", "checkMemories", "lookUpMemoryCache", "lookUpStoredCache", "refresh", "answer"])
        #expect(walk.redemption?.mode == .cacheFirst)
        #expect(walk.redemption?.claims?.contains("cp1") == true)
        #expect(walk.result?.source == .refresh)
        guard case .refreshed(_, let declined, _)? = walk.aftermath else {
            Issue.record("expected refreshed, got \(String(describing: walk.aftermath))")
            return
        }
        #expect(declined.isEmpty)
    }

    @Test("A refresh the platform answered with fewer scopes: 409 server_declined_scopes, the declined scopes still remembered")
    func refreshDeclined() {
        let walk = Self.walk(
            Self.request(scopes: ["User.Read", "Mail.Read"]),
            World(outcome: .token(Self.token(), declined: ["https://graph.microsoft.com/Mail.Read"], source: .refresh)))
        #expect(walk.refusal?.code == .serverDeclinedScopes)
        guard case .refreshed(_, let declined, _)? = walk.aftermath else {
            Issue.record("expected refreshed, got \(String(describing: walk.aftermath))")
            return
        }
        #expect(declined == ["https://graph.microsoft.com/Mail.Read"])
    }

    @Test("A refreshed token granting scopes the key may not ask for is kept for others but refused to this key (403)")
    func refreshedTokenExceedsKey() {
        let wide = Self.token(scopes: [Self.graphUserRead, "https://graph.microsoft.com/Mail.Read"])
        let walk = Self.walk(
            Self.request(), World(outcome: .token(wide, declined: [], source: .refresh)),
            access: KeyAccess(scopePatterns: ["https://graph.microsoft.com/User.*"]))
        #expect(walk.steps.suffix(2) == ["refresh", "refuse"])
        #expect(walk.refusal?.code == .forbidden)
        guard case .refreshed? = walk.aftermath else {
            Issue.record("expected refreshed (use recorded), got \(String(describing: walk.aftermath))")
            return
        }
    }

    @Test("The platform asks for MFA: 409 interaction_required with a sign-in hint carrying the scopes, remembered for replay")
    func refreshNeedsInteraction() {
        let mfa = Self.failure(
            status: 400, #"{"error":"invalid_grant","error_description":"AADSTS50076: MFA","error_codes":[50076],"suberror":"basic_action"}"#)
        let walk = Self.walk(Self.request(), World(outcome: .failure(mfa)))
        #expect(walk.refusal?.code == .interactionRequired)
        #expect(walk.refusal?.signInHint?.scopes == ["User.Read"])
        guard case .rememberUIRequired? = walk.aftermath else {
            Issue.record("expected rememberUIRequired, got \(String(describing: walk.aftermath))")
            return
        }
    }

    @Test("STS unavailable with allow_extended_lifetime: a token inside ext_expires_on is served, flagged; without it, the 503")
    func extendedLifetime() {
        let down = AcquisitionError.unavailable(RelayError.unavailable("The identity provider is unavailable.", retryAfterSeconds: 5))
        let stale = Self.token(expiresIn: 10, extExpiresIn: 7200)
        let served = Self.walk(Self.request(), World(outcome: .failure(down), extended: stale), extendedLifetime: true)
        #expect(served.steps.suffix(3) == ["refresh", "lookUpExtendedLifetime", "answer"])
        #expect(served.result?.extendedLifetime == true)
        let refused = Self.walk(Self.request(), World(outcome: .failure(down), extended: stale))
        #expect(!refused.steps.contains("lookUpExtendedLifetime"))
        #expect(refused.refusal?.code == .upstreamUnavailable)
        #expect(refused.refusal?.retryAfterSeconds == 5)
    }

    // MARK: One pass

    @Test("The suspended step carries on where memory stopped: every step taken once across both")
    func memoryThenSuspended() {
        let world = World(storedHit: Self.token())
        var plan = Self.plan(Self.request())
        let onServerThread = Self.walk(&plan, world, memoryOnly: true)
        #expect(onServerThread.steps == ["resolveAccount", "checkSuspension", "checkMemories", "lookUpMemoryCache", "lookUpStoredCache"])
        let suspended = Self.walk(&plan, world)
        #expect(suspended.steps == ["lookUpStoredCache", "answer"])
    }
}
