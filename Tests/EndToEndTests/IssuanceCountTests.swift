import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// Token issuance is counted per (key, account) with `last_at`, flushed in batches, never a
/// write per request (behaviour §12 Audit), through the real binaries.
@Suite("Token issuance counts through the whole stack", .serialized)
struct IssuanceCountTests {
    static func silent(_ stack: TokenRelayStack, _ id: String, key: String? = nil, forceRefresh: Bool = false) async throws -> TestResponse {
        try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": forceRefresh],
            headers: key.map { ["Authorization": "Bearer \($0)"] } ?? [:])
    }

    /// `key_id → count` of the stored rows for `accountId`, and whether every row has a `last_at`.
    static func stored(_ stack: TokenRelayStack, _ accountId: String) async throws -> [String: Int64] {
        try await stack.withDatabase { connection in
            let rows = try connection.query(
                "SELECT key_id, count FROM token_issuance_counts WHERE account_id = $1 AND last_at > now() - interval '1 hour'",
                [.text(accountId)]
            ).rows
            return Dictionary(uniqueKeysWithValues: rows.map { ($0.string("key_id") ?? "", $0.int("count") ?? -1) })
        }
    }

    @Test("Cached answers for two keys are counted in memory, written nowhere per request, and flushed exactly on graceful stop")
    func countedAndFlushedOnStop() async throws {
        let stack = try await TokenRelayStack(name: "e2e_issuance_stop", environment: ["TOKENRELAY_ISSUANCE_FLUSH_INTERVAL_S": "3600"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let other = try await StackHelpers.createKey(stack, permissions: ["tokens:acquire"])
        for _ in 0..<5 {
            let answer = try await Self.silent(stack, id)
            #expect(answer.status == 200, "\(answer.text)")
            #expect(answer.json["source"] as? String == "cache")
        }
        #expect(try await Self.silent(stack, id, forceRefresh: true).json["source"] as? String == "refresh")
        for _ in 0..<3 {
            #expect(try await Self.silent(stack, id, key: other.key).status == 200)
        }
        // A refused request is no issuance.
        #expect(try await Self.silent(stack, "acc_missing").status == 404)
        #expect(try await Self.stored(stack, id).isEmpty, "no row is written per request")
        // App tokens are counted under their owner, `app:{tenant}`.
        for _ in 0..<2 {
            #expect(try await stack.request("POST", "/v1/tokens/app", json: ["scopes": ["https://graph.microsoft.com/.default"]]).status == 200)
        }

        await stack.relay.stopAndWait()
        #expect(try await Self.stored(stack, id) == [stack.apiKeyId: 6, other.keyId: 3])
        #expect(try await Self.stored(stack, "app:\(stack.tenantId)") == [stack.apiKeyId: 2])
        let (status, output) = try await CommandLineTests.run(["accounts", "show", id], environment: StackHelpers.cliEnvironment(stack))
        #expect(status == 0)
        let shown = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        let issuance = try #require(shown["issuance"] as? [[String: Any]])
        #expect(issuance.compactMap { $0["key_id"] as? String } == [stack.apiKeyId, other.keyId].sorted())
        #expect(issuance.allSatisfy { ($0["last_at"] as? String)?.hasSuffix("Z") == true })
    }

    @Test("The background flush adds counts every interval (one batch, counts add up)")
    func periodicFlushAdds() async throws {
        let stack = try await TokenRelayStack(name: "e2e_issuance_flush", environment: ["TOKENRELAY_ISSUANCE_FLUSH_INTERVAL_S": "1"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let other = try await StackHelpers.createKey(stack, permissions: ["tokens:acquire"])
        for _ in 0..<4 { #expect(try await Self.silent(stack, id).status == 200) }
        for _ in 0..<2 { #expect(try await Self.silent(stack, id, key: other.key).status == 200) }
        try await Self.waitFor(stack, id, [stack.apiKeyId: 4, other.keyId: 2])
        let metrics = try await stack.request("GET", "/metrics", authenticated: false).text
        #expect(metrics.contains(#"tokenrelay_issuance_flushes_total{outcome="written"} "#), "\(metrics)")

        for _ in 0..<3 { #expect(try await Self.silent(stack, id).status == 200) }
        try await Self.waitFor(stack, id, [stack.apiKeyId: 7, other.keyId: 2])
    }

    /// Polls the table until it holds `expected` (the flush interval is 1 s; up to 15 s).
    static func waitFor(_ stack: TokenRelayStack, _ id: String, _ expected: [String: Int64]) async throws {
        var seen: [String: Int64] = [:]
        for _ in 0..<150 {
            seen = try await stored(stack, id)
            if seen == expected { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("token_issuance_counts holds \(seen), expected \(expected)")
    }
}
