import Foundation
import IdentityCore
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayDownstream
import TokenRelayStore
import TokenRelayUpstream

/// One object holds every per-replica memory of accounts and tenants, and forgets through one
/// method each (behaviour §12 Memories and replicas).
@Suite("Replica memory: one place to forget")
struct ReplicaMemoryTests {
    static let now = Int(Date().timeIntervalSince1970)
    static let home = "11111111-1111-1111-1111-111111111111"
    static let other = "22222222-2222-2222-2222-222222222222"

    static func account(_ id: String, realm: String) -> AccountRecord {
        AccountRecord(
            accountId: id, clientId: "client", environment: "login.microsoftonline.com", homeAccountId: "oid-\(id).\(realm)", realm: realm,
            localAccountId: "oid-\(id)", username: "\(id)@contoso.example", name: id, authority: "https://login.microsoftonline.com/\(realm)",
            authorityType: .aad, state: .active, idTokenClaims: "{}", createdAt: "2026-01-01T00:00:00Z", lastUsedAt: nil)
    }

    static func token(_ accountId: String, realm: String) -> StoredAccessToken {
        StoredAccessToken(
            accountId: accountId, environment: "login.microsoftonline.com", realm: realm, clientId: "client",
            scopes: ["https://graph.microsoft.com/User.Read"], secret: "at-\(accountId)", expiresOn: now + 3600, extExpiresOn: nil, refreshOn: nil)
    }

    /// A memory holding `ids` in every part: account, token, UI-required and declined answers, a throttle.
    static func filled(_ ids: [(String, String)]) -> ReplicaMemory {
        let memory = ReplicaMemory(
            tokens: MemoryTokenCache(), accounts: AccountCache(ttl: 600, capacityBytes: 1 << 20), uiRequired: UIRequiredMemory(),
            declinedScopes: DeclinedScopesMemory(), throttles: [ThrottleMemory()], grantTokens: GrantTokenMemory())
        for (id, realm) in ids {
            memory.accounts.store(account(id, realm: realm), readMark: memory.accounts.readMark)
            memory.tokens.store(token(id, realm: realm), now: now)
            memory.uiRequired.remember(RelayError(.interactionRequired, "MFA"), accountId: id, key: "k", now: now)
            memory.declinedScopes.remember(.init(token: token(id, realm: realm), declined: ["x"]), accountId: id, key: "k", now: now)
            memory.throttles[0].remember(
                ThrottleMemory.Key("sts|\(id)", accountId: id), seconds: 60, status: 429, now: Date(timeIntervalSince1970: Double(now)))
        }
        return memory
    }

    static func holds(_ memory: ReplicaMemory, _ id: String, realm: String) -> [String: Bool] {
        [
            "account": memory.accounts.account(id: id) != nil,
            "token": memory.tokens.holdsTokens(of: id),
            "ui_required": memory.uiRequired.recall(accountId: id, key: "k", now: now) != nil,
            "declined": memory.declinedScopes.recall(accountId: id, key: "k", now: now) != nil,
            "throttle": memory.throttles[0].recall(ThrottleMemory.Key("sts|\(id)", accountId: id), now: Date(timeIntervalSince1970: Double(now))) != nil,
        ]
    }

    @Test("forget(account:) drops the account from every memory and leaves the others whole")
    func forgetAccount() {
        let memory = Self.filled([("a", Self.home), ("b", Self.home)])
        memory.forget(account: "a")
        #expect(Self.holds(memory, "a", realm: Self.home).values.allSatisfy { !$0 }, "\(Self.holds(memory, "a", realm: Self.home))")
        #expect(Self.holds(memory, "b", realm: Self.home).values.allSatisfy { $0 }, "\(Self.holds(memory, "b", realm: Self.home))")
    }

    @Test("forget(tenant:) drops the tenant's accounts and every token of its realm, app tokens included; other tenants stay")
    func forgetTenant() {
        let memory = Self.filled([("a", Self.home), ("c", Self.other)])
        memory.grantTokens.store(Self.token("app-other", realm: Self.other), now: Self.now)
        memory.grantTokens.store(Self.token("app-home", realm: Self.home), now: Self.now)
        memory.forget(tenant: Self.other)
        #expect(Self.holds(memory, "c", realm: Self.other).values.allSatisfy { !$0 }, "\(Self.holds(memory, "c", realm: Self.other))")
        #expect(Self.holds(memory, "a", realm: Self.home).values.allSatisfy { $0 })
        let scopes = ScopeSet(normalizing: ["User.Read"])
        func grant(_ owner: String, _ realm: String) -> StoredAccessToken? {
            memory.grantTokens.lookup(owner: owner, environment: "login.microsoftonline.com", realm: realm, scopes: scopes, now: Self.now) { _ in true }
        }
        #expect(grant("app-other", Self.other) == nil)
        #expect(grant("app-home", Self.home) != nil)
    }

    @Test("removeAll() drops account records and access tokens (what a missed notification can make stale) and counts in usage")
    func removeAll() {
        let memory = Self.filled([("a", Self.home)])
        #expect(memory.usage["tokens"]?.entries == 1)
        #expect(memory.usage["accounts"]?.entries == 1)
        memory.removeAll()
        #expect(memory.accounts.account(id: "a") == nil)
        #expect(!memory.tokens.holdsTokens(of: "a"))
        #expect(memory.usage["tokens"]?.entries == 0)
    }

    @Test("The UI-required and declined-scopes memories say whether they may hold an answer: none before one, none after its expiry")
    func mayHold() {
        let uiRequired = UIRequiredMemory(ttlSeconds: 60)
        let declined = DeclinedScopesMemory()
        #expect(!uiRequired.mayHold(now: Self.now) && !declined.mayHold(now: Self.now))
        uiRequired.remember(RelayError(.interactionRequired, "MFA"), accountId: "a", key: "k", now: Self.now)
        declined.remember(.init(token: Self.token("a", realm: Self.home), declined: ["x"]), accountId: "a", key: "k", now: Self.now)
        #expect(uiRequired.mayHold(now: Self.now + 59) && declined.mayHold(now: Self.now + 3599))
        #expect(!uiRequired.mayHold(now: Self.now + 60) && !declined.mayHold(now: Self.now + 3600))
        #expect(!UIRequiredMemory(ttlSeconds: 0).mayHold(now: Self.now), "a memory turned off holds nothing")
    }
}
