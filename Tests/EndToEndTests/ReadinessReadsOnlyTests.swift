import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// Readiness reads and never writes (issue 28): Kubernetes probes `/readyz` every 5 s on every
/// replica, and it used to upsert the encryption-key usage on each probe. Counted by
/// `pg_stat_statements` on a PostgreSQL of the test's own.
@Suite("Readiness writes nothing (pg_stat_statements)", .serialized, .timingGroup(.heavy))
struct ReadinessReadsOnlyTests {
    @Test("Probes of /readyz and the periodic self-check leave pg_stat_statements' write counts unchanged, and still count unwritten encryptions")
    func readinessWritesNothing() async throws {
        try await StatementStatistics.withServer { try await check(on: $0) }
    }

    private func check(on statistics: StatementStatistics) async throws {
        // Nothing else writes in the window: no keep-alive pass, the counts are written hourly,
        // and the self-check runs every second (it must not write either).
        let stack = try await TokenRelayStack(
            name: "e2e_readiness_reads_only",
            environment: [
                "TOKENRELAY_KEEPALIVE_AFTER_DAYS": "0", "TOKENRELAY_ISSUANCE_FLUSH_INTERVAL_S": "3600", "TOKENRELAY_READINESS_CHECK_INTERVAL_S": "1",
            ], databaseURL: statistics.postgres.url)
        defer { stack.stop() }
        // A sign-in and a refresh seal tokens: encryptions counted in memory, not written yet.
        let account = try await stack.signInAccountId()
        let refreshed = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": account, "scopes": ["User.Read"], "force_refresh": true])
        #expect(refreshed.status == 200, "\(refreshed.text)")
        try await Task.sleep(for: .milliseconds(200))

        try await statistics.reset()
        for _ in 0..<20 {
            let ready = try await stack.request("GET", "/readyz", authenticated: false)
            #expect(ready.status == 200, "\(ready.text)")
            // The encryptions this process counted show, though none was written.
            let keys = ((ready.json["checks"] as? [String: Any])?["encryption:keys"] as? [[String: Any]])?.first
            #expect((keys?["observedValue"] as? Double ?? 0) >= 1, "\(ready.text)")
        }
        try await Task.sleep(for: .milliseconds(2500))  // two self-checks or more

        let statements = try await statistics.serviceStatements()
        let writes = statements.filter { statement in
            let query = OwnerKeyedQueryTests.normalised(statement.query)
            let verbs = ["insert", "update", "delete", "merge"]
            let writes = verbs.contains { query.hasPrefix($0) } || (query.hasPrefix("with") && verbs.contains { query.contains(" \($0) ") })
            return writes && statement.calls > 0
        }
        #expect(writes.isEmpty, "readiness wrote: \(writes.map { "\($0.calls)× \($0.query.prefix(160))" })")
        let reads = statements.filter { OwnerKeyedQueryTests.normalised($0.query).hasPrefix("select") }.map(\.calls).reduce(0, +)
        #expect(reads >= 20, "the probes read the database (\(reads) reads)")

        // The counts still reach the table: at shutdown (and every flush interval).
        await stack.relay.stopAndWait()
        let stored = try await stack.withDatabase { connection in
            try connection.query("SELECT coalesce(sum(encryptions), 0)::bigint AS n FROM encryption_key_usage").rows.first?.int("n") ?? 0
        }
        #expect(stored >= 1, "the encryptions were written at shutdown")
    }
}
