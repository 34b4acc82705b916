import Foundation
import PostgresBridge
import Testing
import TokenRelayStore

@Suite("Per-tenant data keys in PostgreSQL")
struct DataKeyStoreTests {
    /// Replicas and requests racing to make a tenant's first data key (a tenant's first sign-ins
    /// at once) all get the one key stored. The losing statement waits for the winner's row, but
    /// its snapshot was taken before the winner committed: it found neither its own row nor the
    /// winner's, and the sign-in failed with 500 (seen in bench/storm).
    @Test("Racing first data keys of one tenant: every insert returns the one key stored")
    func racingInsertsAgree() async throws {
        let connections = 8
        let pool = try await MigratedDatabase.pool(named: "data_key_race", size: connections)
        defer { pool.close() }
        let store = DataKeyStore(database: Database(pool: pool))
        for round in 0..<40 {
            let tenant = "\(UUID())".lowercased()
            let results = try await withThrowingTaskGroup(of: WrappedDataKey.self) { group in
                for racer in 0..<connections {
                    group.addTask {
                        let key = WrappedDataKey(
                            dataKeyId: "dk.race-\(round)-\(racer)", tenantId: tenant, kekId: "k1", wrapped: Array(repeating: UInt8(racer), count: 40))
                        return try await store.insert(key)
                    }
                }
                return try await group.reduce(into: [WrappedDataKey]()) { $0.append($1) }
            }
            let stored = try #require(try await store.find(tenantId: tenant))
            #expect(results.allSatisfy { $0.dataKeyId == stored.dataKeyId && $0.wrapped == stored.wrapped }, "round \(round)")
        }
    }
}
