import Foundation
import PostgresBridge
import Synchronization
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

/// The memories rebuilt on ExpiringMap: what each keeps, how long, and what makes room.
@Suite("Memories on the expiring map")
struct ExpiringMemoriesTests {
    static func token(owner: String, _ scopes: [String] = ["https://graph.microsoft.com/.default"], expiresOn: Int) -> StoredAccessToken {
        StoredAccessToken(
            accountId: owner, environment: "login.microsoftonline.com", realm: "t", clientId: "c", scopes: scopes, secret: "s",
            expiresOn: expiresOn, extExpiresOn: nil, refreshOn: nil)
    }

    static func lookup(_ memory: GrantTokenMemory, _ owner: String, now: Int) -> StoredAccessToken? {
        memory.lookup(
            owner: owner, environment: "login.microsoftonline.com", realm: "t", scopes: .init(normalizing: ["https://graph.microsoft.com/.default"]),
            now: now
        ) { _ in true }
    }

    @Test("Grant tokens: a full memory drops the owner whose tokens end soonest, not every owner")
    func grantTokensBounded() {
        let memory = GrantTokenMemory()
        memory.store(Self.token(owner: "obo:soonest", expiresOn: 5_000), now: 1_000)
        for index in 1..<GrantTokenMemory.capacity {
            memory.store(Self.token(owner: "obo:\(index)", expiresOn: 9_000 + index), now: 1_000)
        }
        #expect(memory.count == GrantTokenMemory.capacity)
        memory.store(Self.token(owner: "app:new", expiresOn: 8_000), now: 1_000)
        #expect(memory.count == GrantTokenMemory.capacity)
        #expect(Self.lookup(memory, "obo:soonest", now: 1_000) == nil)
        #expect(Self.lookup(memory, "obo:1", now: 1_000) != nil)
        #expect(Self.lookup(memory, "app:new", now: 1_000) != nil)
    }

    @Test("Grant tokens: an owner is held until its longest-lived token ends; the same target replaces, another adds")
    func grantTokensExpire() {
        let memory = GrantTokenMemory()
        memory.store(Self.token(owner: "app:t", expiresOn: 2_000), now: 1_000)
        memory.store(Self.token(owner: "app:t", ["https://vault.azure.net/.default"], expiresOn: 3_000), now: 1_000)
        memory.store(Self.token(owner: "app:t", expiresOn: 2_500), now: 1_000)
        #expect(memory.count == 2)
        #expect(Self.lookup(memory, "app:t", now: 1_000)?.expiresOn == 2_500)
        #expect(Self.lookup(memory, "app:t", now: 2_999) != nil, "the owner went with its first token")
        #expect(Self.lookup(memory, "app:t", now: 3_000) == nil)
        #expect(memory.count == 0)
    }

    static let account = AccountCacheTests.account

    /// Bytes for any two of `accounts` and never three. Records alike differ in cost by 16 bytes
    /// from one process to the next (the capacity an account's JSON bytes grew to), so room for
    /// "two of this one" could hold two of another or only one: CI saw a dropped that way.
    static func roomForTwo(_ accounts: [AccountRecord]) -> Int {
        let costs = accounts.map { $0.memoryCost + AccountCache.entryOverheadBytes }
        let room = 2 * costs.max()!
        precondition(3 * costs.min()! > room, "three accounts fit")
        return room
    }

    @Test("Accounts are served for the TTL on the injected clock, and the least recently used makes room by bytes")
    func accountsExpireAndAreBounded() {
        let clock = TestClock(unixTime: 1_000)
        func record(_ id: String) -> AccountRecord {
            AccountRecord(
                accountId: id, clientId: "c", environment: "login.microsoftonline.com", homeAccountId: "u.t", realm: "t", localAccountId: "u",
                username: "u@contoso.example", name: nil, authority: "https://login.microsoftonline.com/t", authorityType: .aad, state: .active,
                idTokenClaims: "{}", createdAt: "2026-11-29T00:00:00Z", lastUsedAt: nil)
        }
        let room = Self.roomForTwo([Self.account] + ["a", "b", "c"].map(record))
        let cache = AccountCache(ttl: 30, capacityBytes: room, clock: clock.clock)
        cache.store(Self.account, readMark: cache.readMark)
        clock.advance(by: 29.5)
        #expect(cache.account(id: "acc_1") != nil)
        clock.advance(by: 0.5)
        #expect(cache.account(id: "acc_1") == nil)

        clock.advance(by: 970)  // 2,000
        for id in ["a", "b"] {
            cache.store(record(id), readMark: cache.readMark)
            clock.advance(by: 1)
        }
        #expect(cache.account(id: "a") != nil)  // a is now more recently used than b
        cache.store(record("c"), readMark: cache.readMark)
        #expect(cache.account(id: "b") == nil)
        #expect(cache.account(id: "a") != nil)
        #expect(cache.account(id: "c") != nil)
        #expect(cache.usage.evictions >= 1 && cache.usage.bytes <= room)
    }

    @Test("Touches: at most once per interval per account held; a re-read keeps the time; memory bounds them with the accounts")
    func touches() {
        let clock = TestClock(unixTime: 1_000)
        func record(_ id: String) -> AccountRecord {
            AccountRecord(
                accountId: id, clientId: "c", environment: "login.microsoftonline.com", homeAccountId: "u.t", realm: "t", localAccountId: "u",
                username: "u@contoso.example", name: nil, authority: "https://login.microsoftonline.com/t", authorityType: .aad, state: .active,
                idTokenClaims: "{}", createdAt: "2026-11-29T00:00:00Z", lastUsedAt: nil)
        }
        let room = Self.roomForTwo(["a", "b", "c"].map(record))
        let cache = AccountCache(ttl: 30, capacityBytes: room, clock: clock.clock)
        cache.store(record("a"), readMark: cache.readMark)
        #expect(cache.claimTouch(id: "a", now: 1_000))
        #expect(!cache.claimTouch(id: "a", now: 1_000 + AccountCache.touchInterval - 1))
        // The entry expires and the account is read again: the touch time survives the re-read.
        clock.advance(by: 100)
        #expect(cache.account(id: "a") == nil)
        cache.store(record("a"), readMark: cache.readMark)
        #expect(!cache.claimTouch(id: "a", now: 1_100))
        #expect(cache.claimTouch(id: "a", now: 1_000 + AccountCache.touchInterval))
        // Nothing is remembered for an account memory does not hold: no entry is made for it,
        // so touches of unknown ids cannot grow memory past the accounts' bytes.
        #expect(cache.claimTouch(id: "x", now: 1_400))
        #expect(cache.claimTouch(id: "x", now: 1_401))
        #expect(cache.usage.entries == 1)
        // Dropped to make room, its time goes with it.
        cache.store(record("b"), readMark: cache.readMark)
        #expect(cache.claimTouch(id: "b", now: 1_402))
        cache.store(record("c"), readMark: cache.readMark)
        #expect(cache.usage.entries == 2 && cache.account(id: "a") == nil)
        #expect(!cache.claimTouch(id: "b", now: 1_403))
        #expect(cache.claimTouch(id: "a", now: 1_404))
    }

    @Test("API keys: made-up key ids make room among themselves; a real key stays in memory")
    func apiKeysOutlastUnknownIds() async throws {
        let pool = try await MigratedDatabase.pool(named: "key_cache_real")
        defer { pool.close() }
        let store = APIKeyStore(database: Database(pool: pool))
        let authenticator = APIKeyAuthenticator(bootstrapKey: nil, keys: store, cacheLimit: 3)
        let (_, apiKey) = try await APIKeyAuthenticator.create(name: "real", permissions: [.tokensAcquire], store: store)
        _ = try await authenticator.authenticate("Bearer " + apiKey)
        for index in 0..<10 {
            await #expect(throws: RelayError.self) { try await authenticator.authenticate("Bearer trk_unknown\(index)a_secret") }
        }
        #expect(authenticator.cachedKeyCount == 3)
        #expect(
            { if case .caller = authenticator.authenticateFromMemory("Bearer " + apiKey) { true } else { false } }(), "unknown ids pushed the real key out")
    }
    @Test("API keys: a verified key is known from memory; another secret under its id, a longer or shorter key, and keys near the bootstrap key are refused")
    func verifiedKeysCompareWholeKeys() async throws {
        let pool = try await MigratedDatabase.pool(named: "key_cache_verified")
        defer { pool.close() }
        let store = APIKeyStore(database: Database(pool: pool))
        let bootstrap = "trk_bootstrap_" + String(repeating: "b", count: 43)
        let authenticator = APIKeyAuthenticator(bootstrapKey: bootstrap, keys: store)
        let (keyId, apiKey) = try await APIKeyAuthenticator.create(name: "real", permissions: [.tokensAcquire], store: store)
        func verdict(_ key: String) -> String {
            switch authenticator.authenticateFromMemory("Bearer " + key) {
            case .caller(let caller): caller.keyId
            case .refused(let problem): "refused \(problem.status)"
            case .unknown: "unknown"
            }
        }
        #expect(verdict(apiKey) == "unknown")
        _ = try await authenticator.authenticate("Bearer " + apiKey)
        // Checked against the stored hash once, then remembered.
        #expect(verdict(apiKey) == keyId)
        #expect(verdict(apiKey) == keyId)
        var otherSecret = Array(apiKey.utf8)
        otherSecret[otherSecret.count - 1] = otherSecret.last == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        for wrong in [String(decoding: otherSecret, as: UTF8.self), apiKey + "x", String(apiKey.dropLast()), "trk_\(keyId)_x"] {
            #expect(verdict(wrong) == "refused 401", "\(wrong.count) bytes")
            await #expect(throws: RelayError.self) { try await authenticator.authenticate("Bearer " + wrong) }
        }
        // The right key is still known after the refusals.
        #expect(verdict(apiKey) == keyId)
        #expect(verdict(bootstrap) == "bootstrap")
        for wrong in [bootstrap + "b", String(bootstrap.dropLast())] {
            #expect(verdict(wrong) != "bootstrap")
            await #expect(throws: RelayError.self) { try await authenticator.authenticate("Bearer " + wrong) }
        }
    }

    @Test("The bootstrap key is known by the keyid of trk_<keyid>_<secret> like any key; one of another form as bootstrap")
    func bootstrapKeyId() async throws {
        #expect(APIKeyAuthenticator.bootstrapKeyId("trk_setup0123_" + String(repeating: "s", count: 43)) == "setup0123")
        #expect(APIKeyAuthenticator.bootstrapKeyId("a-development-key") == "bootstrap")
        #expect(APIKeyAuthenticator.bootstrapKeyId("trk_short_secret") == "bootstrap")
        let pool = try await MigratedDatabase.pool(named: "key_bootstrap_id")
        defer { pool.close() }
        let key = "trk_setup0123_" + String(repeating: "s", count: 43)
        let authenticator = APIKeyAuthenticator(bootstrapKey: key, keys: APIKeyStore(database: Database(pool: pool)))
        #expect(try await authenticator.authenticate("Bearer " + key).keyId == "setup0123")
        #expect(try await authenticator.authenticate("Bearer " + key).owner == APIKeyAuthenticator.bootstrapOwner)
    }
}
