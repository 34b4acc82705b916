import Foundation
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

@Suite("Migrations")
struct MigratorTests {
    static func migrator() throws -> Migrator {
        try Migrator(directory: BuiltProducts.packageRoot() + "/migrations")
    }

    @Test("Two replicas migrating at once apply each migration exactly once")
    func concurrentReplicas() async throws {
        let url = try await TestPostgres.freshDatabase(named: "migrate_race")
        let migrator = try Self.migrator()
        let pools = [PostgresPool(url: url, size: 1), PostgresPool(url: url, size: 1), PostgresPool(url: url, size: 1)]
        defer { pools.forEach { $0.close() } }
        let applied = try await withThrowingTaskGroup(of: [String].self) { group in
            for pool in pools { group.addTask { try await migrator.apply(on: pool) } }
            return try await group.reduce(into: [String]()) { $0 += $1 }
        }
        #expect(applied.sorted() == migrator.migrations.map(\.version).sorted())
        let recorded = try await pools[0].withConnection { connection in
            try connection.query("SELECT count(*) AS n FROM schema_migrations").rows.first?.int("n")
        }
        #expect(recorded == Int64(migrator.migrations.count))
        let pending = try await pools[0].withConnection { try migrator.pending(on: $0) }
        #expect(pending.isEmpty)
        #expect(try await migrator.apply(on: pools[1]).isEmpty)
    }

    @Test("A fresh database reports every migration pending")
    func pendingOnFreshDatabase() async throws {
        let url = try await TestPostgres.freshDatabase(named: "migrate_pending")
        let pool = PostgresPool(url: url, size: 1)
        defer { pool.close() }
        let migrator = try Self.migrator()
        let pending = try await pool.withConnection { try migrator.pending(on: $0) }
        #expect(pending == migrator.migrations.map(\.version))
    }
}
