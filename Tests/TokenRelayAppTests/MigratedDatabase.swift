import PostgresBridge
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore
import TokenRelayTesting

/// A new database with every migration applied, for tests that use one store directly.
enum MigratedDatabase {
    /// A pool of `size` connections to a fresh, migrated database named after `prefix`; the
    /// caller closes it.
    static func pool(named prefix: String, size: Int = 1) async throws -> PostgresPool {
        let pool = PostgresPool(url: try await TestPostgres.freshDatabase(named: prefix), size: size)
        _ = try await Migrator(directory: BuiltProducts.packageRoot() + "/migrations").apply(on: pool)
        return pool
    }
}
