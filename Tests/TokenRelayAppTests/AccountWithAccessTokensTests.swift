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

/// ``TokenStore/accountWithAccessTokens(id:owner:)`` (issue 13: a silent request whose token only
/// PostgreSQL holds reads account and tokens in one statement) reads what the two reads it stands
/// in for read: ``TokenStore/account(id:owner:)``, then
/// ``TokenStore/accessTokens(accountId:environment:realm:)`` for the account's own environment
/// and realm.
@Suite("TokenStore account with its access tokens", .serialized)
struct AccountWithAccessTokensTests {
    static let guestRealm = "33333333-3333-3333-3333-333333333333"

    /// A token of `accountId` in the seeded environment, valid for an hour.
    static func token(_ accountId: String, realm: String = ScaleFixture.tenant, scopes: [String], secret: String) -> StoredAccessToken {
        let now = Int(Date().timeIntervalSince1970)
        return StoredAccessToken(
            accountId: accountId, environment: "127.0.0.1:1", realm: realm, clientId: ScaleFixture.clientId, scopes: scopes, secret: secret,
            expiresOn: now + 3600, extExpiresOn: now + 7200, refreshOn: nil)
    }

    /// The two separate reads.
    static func separately(_ store: TokenStore, id: String, owner: String? = nil) async throws -> (AccountRecord, [StoredAccessToken])? {
        guard let account = try await store.account(id: id, owner: owner) else { return nil }
        return (account, try await store.accessTokens(accountId: account.accountId, environment: account.environment, realm: account.realm))
    }

    static func sorted(_ tokens: [StoredAccessToken]?) -> [StoredAccessToken]? {
        tokens?.sorted { $0.scopes.joined(separator: " ") < $1.scopes.joined(separator: " ") }
    }

    @Test("The same account and own-realm tokens as the two reads; tokens not read for an alias or an external id; nil for no account")
    func sameAsTwoReads() async throws {
        let ring = try KeyRing(parsing: KeyRing.generateEntry(id: "k1"))
        let pool = try await ScaleFixture.seeded("account_with_tokens", accounts: 3, ring: ring)
        defer { pool.close() }
        let store = TokenStore(database: Database(pool: pool), clientId: ScaleFixture.clientId, cipher: TokenCipher(ring: ring))
        let (first, second, third) = (BenchSeeder.accountId(0), BenchSeeder.accountId(1), BenchSeeder.accountId(2))
        // The first account: a second token in its realm, and one in another tenant (a guest's),
        // which the combined read leaves to its own read. The second: no token at all. The third
        // is named by an import alias and by an external id of the key owner "crm".
        try await store.database.run { connection in
            try store.saveAccessToken(in: connection, Self.token(first, scopes: ["Mail.Read"], secret: "mail-token"))
            try store.saveAccessToken(in: connection, Self.token(first, realm: Self.guestRealm, scopes: ["User.Read"], secret: "guest-token"))
            try connection.query("DELETE FROM access_tokens WHERE account_id = $1", [.text(second)])
            try connection.query(
                "INSERT INTO account_aliases (alias_account_id, account_id, client_id) VALUES ('acc_imported_alias', $1, $2)",
                [.text(third), .text(ScaleFixture.clientId)])
            try connection.query("INSERT INTO account_external_ids (account_id, owner, external_id) VALUES ($1, 'crm', 'customer-7')", [.text(third)])
        }

        for id in [first, second, third] {
            let combined = try #require(try await store.accountWithAccessTokens(id: id))
            let (account, tokens) = try #require(try await Self.separately(store, id: id))
            #expect(combined.account == account, "\(id)")
            #expect(Self.sorted(combined.accessTokens) == Self.sorted(tokens), "\(id)")
        }
        let firstTokens = try #require(try await store.accountWithAccessTokens(id: first)?.accessTokens)
        #expect(Set(firstTokens.map(\.secret)).count == 2 && !firstTokens.contains { $0.secret == "guest-token" })
        #expect(try await store.accountWithAccessTokens(id: second)?.accessTokens == [])

        for (id, owner) in [("acc_imported_alias", nil), ("customer-7", "crm")] {
            let combined = try #require(try await store.accountWithAccessTokens(id: id, owner: owner))
            #expect(combined.account == (try await store.account(id: id, owner: owner)), "\(id)")
            #expect(combined.account.accountId == third && combined.accessTokens == nil, "\(id)")
        }
        #expect(try await store.accountWithAccessTokens(id: "customer-7") == nil)
        #expect(try await store.accountWithAccessTokens(id: "customer-7", owner: "another-owner") == nil)
        #expect(try await store.accountWithAccessTokens(id: "acc_no_such_account") == nil)
        let otherClient = TokenStore(database: Database(pool: pool), clientId: "another-client", cipher: TokenCipher(ring: ring))
        #expect(try await otherClient.accountWithAccessTokens(id: first) == nil)
    }

    @Test("A token whose tenant's data key is not in memory is not read with the account: the separate read loads the key")
    func dataKeyNotInMemory() async throws {
        let ring = try KeyRing(parsing: KeyRing.generateEntry(id: "k1"))
        let pool = try await ScaleFixture.seeded("account_with_tokens_data_key", accounts: 1, ring: ring)
        defer { pool.close() }
        let database = Database(pool: pool)
        func store() -> TokenStore {
            let dataKeys = TenantDataKeys(store: DataKeyStore(database: database), keys: KeyEncryptionKeys(ring: ring, hsm: []))
            return TokenStore(database: database, clientId: ScaleFixture.clientId, cipher: TokenCipher(ring: ring, dataKeys: dataKeys))
        }
        let id = BenchSeeder.accountId(0)
        let writer = store()
        try await database.run { connection in
            try writer.saveAccessToken(in: connection, Self.token(id, scopes: ["Mail.Read"], secret: "sealed-under-the-tenant-key"))
        }
        let reader = store()  // a new process: no data key in memory
        let first = try #require(try await reader.accountWithAccessTokens(id: id))
        #expect(first.account.accountId == id && first.accessTokens == nil)
        let separate = try await reader.accessTokens(accountId: id, environment: first.account.environment, realm: first.account.realm)
        #expect(separate.contains { $0.secret == "sealed-under-the-tenant-key" } && separate.count == 2)
        let again = try #require(try await reader.accountWithAccessTokens(id: id))
        #expect(Self.sorted(again.accessTokens) == Self.sorted(separate))
    }

    @Test("The statement reads accounts and access_tokens by their primary keys")
    func usesPrimaryKeys() async throws {
        let ring = try KeyRing(parsing: KeyRing.generateEntry(id: "k1"))
        let pool = try await ScaleFixture.seeded("account_with_tokens_plan", accounts: 3, ring: ring)
        defer { pool.close() }
        // Three rows make a sequential scan the cheapest plan; without that choice the plan
        // shows which indexes the statement can use at any size.
        let plan = try await pool.withConnection { connection in
            try connection.execute("SET enable_seqscan = off")
            return try connection.query(
                "EXPLAIN (COSTS OFF) " + TokenStore.accountByIdWithAccessTokens,
                [.text(BenchSeeder.accountId(1)), .text(ScaleFixture.clientId), .null]
            ).rows.compactMap { $0.string("QUERY PLAN") }.joined(separator: "\n")
        }
        #expect(plan.contains("access_tokens_pkey") && plan.contains("accounts_pkey"), "\(plan)")
        #expect(!plan.contains("Seq Scan"), "\(plan)")
    }
}
