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

/// Seeds real accounts with bench-seed's own code (``BenchSeeder``) into a fresh database.
enum ScaleFixture {
    static let clientId = "6731de76-14a6-49ae-97bc-6eba6914391e"
    static let tenant = "11111111-1111-1111-1111-111111111111"
    static let secondTenant = "22222222-2222-2222-2222-222222222222"

    static func seeded(_ name: String, accounts: Int, ring: KeyRing) async throws -> PostgresPool {
        let url = try await TestPostgres.freshDatabase(named: name)
        let pool = PostgresPool(url: url, size: 2)
        _ = try await Migrator(directory: BuiltProducts.packageRoot() + "/migrations").apply(on: pool)
        let seeder = BenchSeeder(
            store: BenchSeedStore(database: Database(pool: pool), clientId: clientId), cipher: TokenCipher(ring: ring), clientId: clientId,
            authority: Authority(scheme: "http", host: "127.0.0.1", port: 1, tenant: tenant, policy: nil, type: .aad), secondTenant: secondTenant,
            refreshKey: Array("scale-test-key".utf8), scopes: ScopeSet(normalizing: ["User.Read"]), validitySeconds: 3600,
            now: Int(Date().timeIntervalSince1970))
        let added = try await seeder.run(count: accounts, batchSize: 5000) { _, _ in }
        #expect(added == accounts)
        // Statistics as autovacuum leaves them after a bulk load: the planner sees the real sizes.
        _ = try await pool.withConnection { try $0.execute("ANALYZE") }
        return pool
    }

    /// The plan of `sql` with `parameters` (one text line per node).
    static func plan(_ sql: String, _ parameters: [PostgresParameter], on pool: PostgresPool) async throws -> String {
        try await pool.withConnection { connection in
            try connection.query("EXPLAIN (COSTS OFF) " + sql, parameters).rows.compactMap { $0.string("QUERY PLAN") }.joined(separator: "\n")
        }
    }
}

/// `GET /v1/accounts?tenant_id=` at 20,000 accounts (issue 13): a page reads the tenant's ids
/// from the `lower(realm)` indexes of migration 0015, and the listing is still exactly the
/// accounts whose realm, or one of whose tenant profiles, is the tenant (behaviour §12).
@Suite("Tenant listing at scale", .serialized, .timingGroup(.heavy))
struct TenantListingScaleTests {
    @Test("A tenant page uses the lower(realm) indexes, not a walk of every account; pages list exactly the tenant's accounts")
    func tenantPagesUseTheIndex() async throws {
        let ring = try KeyRing(parsing: KeyRing.generateEntry(id: "k1"))
        let pool = try await ScaleFixture.seeded("scale_tenant_listing", accounts: 20_000, ring: ring)
        defer { pool.close() }
        let store = TokenStore(database: Database(pool: pool), clientId: ScaleFixture.clientId, cipher: TokenCipher(ring: ring))
        // A guest: account 5 (home in the first tenant) with a profile in the second; and account
        // 199 of the second tenant known by its realm alone (no profile, as a pending import).
        _ = try await pool.withConnection { connection in
            try connection.query(
                "INSERT INTO account_tenant_profiles (account_id, realm, local_account_id, is_home) VALUES ($1, $2, 'guest-oid', false)",
                [.text(BenchSeeder.accountId(5)), .text(ScaleFixture.secondTenant.uppercased())])
            try connection.query("DELETE FROM account_tenant_profiles WHERE account_id = $1", [.text(BenchSeeder.accountId(199))])
        }
        let middle = BenchSeeder.accountId(10_099)
        let plan = try await ScaleFixture.plan(
            TokenStore.listAccountsStatement(tenant: true),
            [.text(ScaleFixture.clientId), .null, .text(ScaleFixture.secondTenant), .text(middle), .int(51), .null, .text("owner"), .null, .null], on: pool)
        #expect(plan.contains("accounts_lower_realm_idx"), "\(plan)")
        #expect(plan.contains("account_tenant_profiles_lower_realm_idx"), "\(plan)")
        #expect(!plan.contains("Seq Scan on accounts") && !plan.contains("Seq Scan on account_tenant_profiles"), "\(plan)")
        // The page is driven by the tenant's index entries, not a walk of every account id
        // filtered against the tenant's whole id set.
        #expect(!plan.contains("hashed SubPlan"), "\(plan)")

        var listed: [String] = []
        var after: String?
        while true {
            let page = try await store.listAccounts(username: nil, tenantId: ScaleFixture.secondTenant.uppercased(), afterAccountId: after, limit: 50)
            listed += page.map(\.accountId)
            guard page.count == 50, let last = page.last else { break }
            after = last.accountId
        }
        let expected = ([5] + stride(from: 99, to: 20_000, by: 100)).map(BenchSeeder.accountId)
        #expect(listed == expected)
    }
}

/// `token-relay encryption rotate` at scale (issue 13): each batch continues from the previous
/// one's primary key on the primary key's index, so a sweep is linear. The old walk
/// (`ctid > cursor ORDER BY ctid`) sorted every row after the cursor in every batch.
@Suite("Rotation batches at scale", .serialized, .timingGroup(.heavy))
struct RotationBatchScaleTests {
    @Test("A batch after a cursor is an index scan in key order (no sort, no scan of the table); a sweep re-encrypts every row once")
    func batchesWalkThePrimaryKey() async throws {
        let oldEntry = KeyRing.generateEntry(id: "old")
        let pool = try await ScaleFixture.seeded("scale_rotation", accounts: 3000, ring: try KeyRing(parsing: oldEntry))
        defer { pool.close() }
        // The two seeded tables (the planner may sort an empty table: it costs nothing).
        for columns in CiphertextColumns.all where ["access_tokens", "refresh_tokens"].contains(columns.table) {
            let plan = try await ScaleFixture.plan(
                CiphertextStore.batchStatement(columns, afterCursor: true, limit: 100),
                [.text("new"), .text(ScaleFixture.clientId)] + columns.key.map { _ in .text("acc_scale_0000001500") }, on: pool)
            #expect(plan.contains("Index Scan using \(columns.table)_pkey"), "\(columns.table): \(plan)")
            #expect(!plan.contains("Sort") && !plan.contains("Seq Scan") && !plan.contains("Tid"), "\(columns.table): \(plan)")
        }

        let ring = try KeyRing(parsing: KeyRing.generateEntry(id: "new") + "," + oldEntry)
        let cipher = TokenCipher(ring: ring)
        let store = CiphertextStore(database: Database(pool: pool), clientId: ScaleFixture.clientId, cipher: cipher)
        let report = try await KeyRotation(store: store, logger: Logger(level: .error, logPII: false), batchSize: 100).run()
        #expect(report.reencrypted == 6000)
        #expect(report.remaining == 0 && report.failed == 0)
        // Every row opens under the new key for its own account.
        let tokens = TokenStore(database: Database(pool: pool), clientId: ScaleFixture.clientId, cipher: cipher)
        let stored = try await tokens.accessTokens(accountId: BenchSeeder.accountId(2998), environment: "127.0.0.1:1", realm: ScaleFixture.tenant)
        #expect(stored.count == 1 && stored[0].secret.hasPrefix("eyJ"))
    }
}
