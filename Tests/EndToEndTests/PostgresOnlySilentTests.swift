import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// A silent request whose account and token only PostgreSQL holds (after a restart) reads them in
/// one statement, one round trip (issue 13: its latency at a million accounts; behaviour §10).
/// Counted by `pg_stat_statements` on a PostgreSQL of the test's own.
@Suite("PostgreSQL-only silent request: one statement (pg_stat_statements)", .serialized, .timingGroup(.heavy))
struct PostgresOnlySilentTests {
    @Test("After a restart, a silent request by account_id reads its account and cached token in one statement")
    func oneStatementAfterRestart() async throws {
        try await StatementStatistics.withServer { try await check(on: $0) }
    }

    private func check(on statistics: StatementStatistics) async throws {
        let postgres = statistics.postgres
        // No keep-alive pass: it reads accounts in the background.
        let stack = try await TokenRelayStack(
            name: "e2e_pg_only_silent", environment: ["TOKENRELAY_KEEPALIVE_AFTER_DAYS": "0"], databaseURL: postgres.url)
        defer { stack.stop() }
        let alice = try await stack.signInAccountId("alice@contoso.example")
        let bob = try await stack.signInAccountId("bob@contoso.example")
        let body: [String: Any] = ["account_id": bob, "scopes": ["User.Read"]]
        let cached = try await stack.request("POST", "/v1/tokens/silent", json: body)
        #expect(cached.status == 200 && cached.json["source"] as? String == "cache", "\(cached.text)")

        try await stack.restartRelay(environment: [:])
        // The first request of a tenant after a start also loads the tenant's data key (a read
        // of its own, and the token read again once the key is in memory): another account's.
        let first = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": alice, "scopes": ["User.Read"]])
        #expect(first.status == 200 && first.json["source"] as? String == "cache", "\(first.text)")
        try await statistics.reset()
        let answer = try await stack.request("POST", "/v1/tokens/silent", json: body)
        #expect(answer.status == 200 && answer.json["source"] as? String == "cache", "\(answer.text)")
        #expect(answer.json["access_token"] as? String == cached.json["access_token"] as? String)

        // The service's reads of accounts and access tokens since the reset (its background
        // `last_used_at` write is not a read).
        let reads = try await statistics.serviceStatements().compactMap { statement -> (String, Int64)? in
            let query = OwnerKeyedQueryTests.normalised(statement.query)
            guard query.hasPrefix("select") || query.hasPrefix("with"),
                OwnerKeyedQueryTests.mentions(query, "accounts") || OwnerKeyedQueryTests.mentions(query, "access_tokens")
            else { return nil }
            return (query, statement.calls)
        }
        #expect(reads.map(\.1).reduce(0, +) == 1, "\(reads)")
        #expect(reads.allSatisfy { OwnerKeyedQueryTests.mentions($0.0, "access_tokens") }, "\(reads)")
    }
}
