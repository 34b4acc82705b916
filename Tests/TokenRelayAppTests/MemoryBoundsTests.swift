import Foundation
import IdentityCore
import PostgresBridge
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore
import TokenRelayTesting

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

    @Test("The LRU holds at most its bytes, drops the least recently used first, and reads refresh recency")
    func lruByBytes() {
        let overhead = ByteBoundedLRU<String, Int>.entryOverheadBytes
        let lru = ByteBoundedLRU<String, Int>(capacityBytes: 3 * (100 + overhead))
        for (index, key) in ["a", "b", "c"].enumerated() { #expect(lru.set(index, for: key, cost: 100)) }
        #expect(lru.usage == MemoryUsage(bytes: 3 * (100 + overhead), entries: 3, evictions: 0))
        #expect(lru.value(for: "a") == 0)  // a becomes the most recently used; b is now the oldest
        #expect(lru.peek("b") == 1)  // a peek does not change that
        lru.set(3, for: "d", cost: 100)
        #expect(lru.peek("b") == nil && lru.peek("a") == 0 && lru.peek("c") == 2 && lru.peek("d") == 3)
        // One large value makes room for itself: the two oldest (c, a) go.
        lru.set(4, for: "e", cost: 250)
        #expect(lru.peek("c") == nil && lru.peek("a") == nil && lru.peek("d") == 3 && lru.peek("e") == 4)
        #expect(lru.usage.evictions == 3 && lru.usage.bytes == 350 + 2 * overhead && lru.usage.entries == 2)
        // A value larger than the whole cache is not stored, and what its key held goes.
        #expect(!lru.set(5, for: "d", cost: 10_000))
        #expect(lru.peek("d") == nil && lru.usage.entries == 1)
        // Replacing a key counts its new cost only; removals free their bytes.
        lru.set(6, for: "e", cost: 10)
        #expect(lru.usage.bytes == 10 + overhead)
        lru.removeValue(for: "e")
        #expect(lru.usage == MemoryUsage(bytes: 0, entries: 0, evictions: 3))
        // Slots are reused after removals and the order stays right.
        for round in 0..<50 { lru.set(round, for: "k\(round)", cost: 100) }
        #expect(lru.usage.entries == 3 && lru.peek("k49") == 49 && lru.peek("k47") == 47 && lru.peek("k46") == nil)
    }

    @Test("modify changes a held value in place, keeps its cost, refreshes its recency, and leaves unknown keys alone")
    func lruModify() {
        let overhead = ByteBoundedLRU<String, Int>.entryOverheadBytes
        let lru = ByteBoundedLRU<String, Int>(capacityBytes: 2 * (100 + overhead))
        lru.set(1, for: "a", cost: 100)
        lru.set(2, for: "b", cost: 100)
        #expect(
            lru.modify("a") { value -> Bool in
                value += 10; return true
            } == true)
        #expect(lru.peek("a") == 11 && lru.usage.bytes == 2 * (100 + overhead))
        #expect(
            lru.modify("x") { _ -> Bool in
                Issue.record("body called for a key not held"); return true
            } == nil)
        #expect(lru.usage.entries == 2)
        lru.set(3, for: "c", cost: 100)  // a was made the most recently used: b goes
        #expect(lru.peek("b") == nil && lru.peek("a") == 11)
    }

    @Test("The token cache holds at most its bytes, counting each token's size, least recently used account out first")
    func tokenCacheByBytes() {
        func token(_ account: String, secretBytes: Int) -> StoredAccessToken {
            StoredAccessToken(
                accountId: account, environment: "login.microsoftonline.com", realm: "t", clientId: "c", scopes: ["User.Read"],
                secret: String(repeating: "x", count: secretBytes), expiresOn: 9_000, extExpiresOn: nil, refreshOn: nil)
        }
        let cache = MemoryTokenCache(capacityBytes: 64 * 1024)
        for index in 0..<100 { cache.store(token("acc\(index)", secretBytes: 2_000), now: 500) }
        // A 2,000-byte token is held twice (the token and its prebuilt answer): about 4.4 KB each.
        #expect(cache.usage.bytes <= 64 * 1024)
        #expect((12...15).contains(cache.usage.entries), "\(cache.usage)")
        #expect(cache.usage.evictions == 100 - cache.usage.entries)
        let scopes = ScopeSet(normalizing: ["User.Read"])
        #expect(cache.lookup(accountId: "acc99", environment: "login.microsoftonline.com", realm: "t", scopes: scopes) != nil)
        #expect(cache.lookup(accountId: "acc0", environment: "login.microsoftonline.com", realm: "t", scopes: scopes) == nil)
        // Small tokens: more of them fit in the same bytes.
        let small = MemoryTokenCache(capacityBytes: 64 * 1024)
        for index in 0..<100 { small.store(token("acc\(index)", secretBytes: 100), now: 500) }
        #expect(small.usage.entries > 3 * cache.usage.entries, "\(small.usage)")
    }

    @Test("A prebuilt answer is byte for byte the answer written from scratch")
    func prebuiltAnswerMatches() throws {
        let token = StoredAccessToken(
            accountId: "acc_1", environment: "login.microsoftonline.com", realm: "t", clientId: "c", scopes: ["Mail.Read", "User.Read"],
            secret: "eyJ\"quoted\"\u{1}", expiresOn: 9_000, extExpiresOn: 12_000, refreshOn: nil)
        let account = AccountCacheTests.account
        let prebuilt = SilentTokenResult(token: token, account: account, source: .cache, declinedScopes: [], prebuiltAnswer: TokenAnswerBytes(cached: token))
        let fresh = SilentTokenResult(token: token, account: account, source: .cache, declinedScopes: [])
        #expect(
            TokenRoutes.tokenBody(prebuilt, correlationId: "c-1", allowPartial: false)
                == TokenRoutes.tokenBody(fresh, correlationId: "c-1", allowPartial: false))
        let object = try JSONSerialization.jsonObject(with: Data(TokenRoutes.tokenBody(prebuilt, correlationId: "c\"2", allowPartial: false))) as? [String: Any]
        #expect(object?["access_token"] as? String == token.secret && object?["correlation_id"] as? String == "c\"2")
        #expect(object?["source"] as? String == "cache" && (object?["account"] as? [String: Any])?["account_id"] as? String == "acc_1")
        // A refresh's answer never uses memory's parts (its source differs).
        let refreshed = SilentTokenResult(token: token, account: account, source: .refresh, declinedScopes: [], prebuiltAnswer: TokenAnswerBytes(cached: token))
        let parsed = try JSONSerialization.jsonObject(with: Data(TokenRoutes.tokenBody(refreshed, correlationId: "c", allowPartial: false))) as? [String: Any]
        #expect(parsed?["source"] as? String == "refresh")
    }

    @Test("A cached answer is written into the buffer it is given, not into new storage")
    func answerWrittenInPlace() {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(4_096)
        let storage = buffer.withUnsafeBytes { $0.baseAddress.map { UInt(bitPattern: $0) } }
        let answer = TokenAnswerBytes(cached: Self.token(["User.Read"], expiresOn: 9_000))
            .answer(account: AccountCacheTests.account, owner: nil, correlationId: "c-1", into: consume buffer)
        #expect(answer.count > 100)
        #expect(answer.withUnsafeBytes { $0.baseAddress.map { UInt(bitPattern: $0) } } == storage)
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
        let pool = try await MigratedDatabase.pool(named: "key_cache")
        defer { pool.close() }
        let authenticator = APIKeyAuthenticator(bootstrapKey: nil, keys: APIKeyStore(database: Database(pool: pool)), cacheLimit: 3)
        for index in 0..<10 {
            await #expect(throws: RelayError.self) { try await authenticator.authenticate("Bearer trk_unknown\(index)a_secret") }
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
