import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

@testable import TokenRelayApp

/// What this replica keeps in memory stays bounded by what is live.
@Suite("Memory bounds")
struct MemoryBoundsTests {
    static func token(_ scopes: [String], expiresOn: Int) -> StoredAccessToken {
        StoredAccessToken(
            accountId: "acc_1", environment: "login.microsoftonline.com", realm: "t", clientId: "c", scopes: scopes, secret: "s",
            expiresOn: expiresOn, extExpiresOn: nil, refreshOn: nil)
    }

    @Test("Storing a token drops the account's expired entries")
    func expiredEntriesEvicted() {
        let cache = MemoryTokenCache()
        cache.store(Self.token(["Mail.Read"], expiresOn: 1_000), now: 500)
        cache.store(Self.token(["User.Read"], expiresOn: 5_000), now: 500)
        #expect(cache.count == 2)
        cache.store(Self.token(["Files.Read"], expiresOn: 9_000), now: 2_000)
        #expect(cache.count == 2)
        #expect(cache.lookup(accountId: "acc_1", environment: "login.microsoftonline.com", realm: "t", scopes: .init(normalizing: ["Mail.Read"])) == nil)
    }

    @Test("Declined-scopes answers stay within their limit: expired ones go first, then new ones are not kept")
    func declinedScopesBounded() {
        let memory = DeclinedScopesMemory(limit: 3)
        func answer(expiresOn: Int) -> DeclinedScopesMemory.Answer {
            let token = StoredAccessToken(
                accountId: "acc", environment: "login.microsoftonline.com", realm: "tid", clientId: "client", scopes: ["User.Read"],
                secret: "t", expiresOn: expiresOn, extExpiresOn: nil, refreshOn: nil)
            return .init(token: token, declined: ["Mail.Read"])
        }
        memory.remember(answer(expiresOn: 150), accountId: "a", key: "k1", now: 100)
        memory.remember(answer(expiresOn: 500), accountId: "a", key: "k2", now: 100)
        memory.remember(answer(expiresOn: 500), accountId: "b", key: "k1", now: 100)
        memory.remember(answer(expiresOn: 500), accountId: "b", key: "k1", now: 100)  // replaces, does not count twice
        #expect(memory.count == 3)
        // Full: the expired answer (k1 of a, at 200) makes room.
        memory.remember(answer(expiresOn: 500), accountId: "c", key: "k1", now: 200)
        #expect(memory.count == 3)
        #expect(memory.recall(accountId: "a", key: "k1", now: 200) == nil)
        #expect(memory.recall(accountId: "c", key: "k1", now: 200) != nil)
        // Full of live answers: a new one is not kept.
        memory.remember(answer(expiresOn: 500), accountId: "d", key: "k1", now: 200)
        #expect(memory.count == 3)
        #expect(memory.recall(accountId: "d", key: "k1", now: 200) == nil)
        memory.forget(accountId: "b")
        #expect(memory.count == 2)
    }

    @Test("Unknown API key ids do not grow the key cache past its limit")
    func apiKeyCacheBounded() async throws {
        let url = try await TestPostgres.freshDatabase(named: "key_cache")
        let pool = PostgresPool(url: url, size: 1)
        defer { pool.close() }
        let migrator = try Migrator(directory: BuiltProducts.packageRoot() + "/migrations")
        _ = try await migrator.apply(on: pool)
        let authenticator = APIKeyAuthenticator(bootstrapKey: nil, keys: APIKeyStore(database: Database(pool: pool)), cacheLimit: 3)
        for index in 0..<10 {
            await #expect(throws: Problem.self) { try await authenticator.authenticate("Bearer trk_unknown\(index)a_secret") }
            #expect(authenticator.cachedKeyCount <= 3)
        }
    }
}

@Suite("Account cache")
struct AccountCacheTests {
    static let account = AccountRecord(
        accountId: "acc_1", clientId: "c", environment: "login.microsoftonline.com", homeAccountId: "u.t", realm: "t", localAccountId: "u",
        username: "alice@contoso.example", name: "Alice", authority: "https://login.microsoftonline.com/t", authorityType: .aad, state: .active,
        idTokenClaims: "{}", createdAt: "2026-11-29T00:00:00Z", lastUsedAt: nil)

    @Test("A read that began before a deletion does not bring the account back")
    func readRacingDeletion() {
        let cache = AccountCache()
        let mark = cache.readMark
        cache.remove(id: "acc_1")
        cache.store(Self.account, readMark: mark)
        #expect(cache.account(id: "acc_1") == nil)
        cache.store(Self.account, readMark: cache.readMark)
        #expect(cache.account(id: "acc_1")?.accountId == "acc_1")
    }
}
