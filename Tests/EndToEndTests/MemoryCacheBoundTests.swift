import Foundation
import Testing
import TokenRelayTesting

/// `TOKENRELAY_MEMORY_CACHE_MB` through the real binary (behaviour §10.4, issue 13): memory holds
/// at most its share of bytes, the least recently used accounts go first, and a token memory no
/// longer holds is answered from the encrypted PostgreSQL cache without an STS call.
@Suite("Memory cache bound", .serialized)
struct MemoryCacheBoundTests {
    static let tenant = "11111111-1111-1111-1111-111111111111"

    /// A users file with `count` users in the stack's tenant.
    static func usersFile(count: Int) throws -> (path: String, usernames: [String]) {
        let usernames = (0..<count).map { "bound\($0)@contoso.example" }
        let users = usernames.enumerated().map { index, name in
            ["username": name, "oid": String(format: "bbbbbbbb-0000-4000-8000-%012d", index)]
        }
        let directory: [String: Any] = ["tenants": [["id": tenant, "domains": ["contoso.example"], "users": users]]]
        let path = NSTemporaryDirectory() + "memory-bound-users-\(UUID().uuidString).json"
        try JSONSerialization.data(withJSONObject: directory).write(to: URL(fileURLWithPath: path))
        return (path, usernames)
    }

    static func gauge(_ metrics: String, _ series: String) -> Double {
        for line in metrics.split(separator: "\n") where line.hasPrefix(series + " ") { return Double(line.dropFirst(series.count + 1)) ?? -1 }
        return -1
    }

    @Test("With 1 MiB, memory stays within its share, the oldest accounts go, and PostgreSQL answers them without the STS")
    func boundedByBytes() async throws {
        let (file, usernames) = try Self.usersFile(count: 240)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let stack = try await TokenRelayStack(
            name: "e2e_memory_bound", environment: ["TOKENRELAY_MEMORY_CACHE_MB": "1"], emulatorArguments: ["--users", file])
        defer { stack.stop() }
        var accounts: [String] = []
        for username in usernames { accounts.append(try await stack.signInAccountId(username)) }
        // One silent request per account brings each token into memory: far more than 768 KiB of them.
        func silent(_ account: String) async throws -> TestResponse {
            try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": account, "scopes": ["User.Read"]])
        }
        for account in accounts { #expect(try await silent(account).status == 200) }
        let metrics = try await stack.request("GET", "/metrics", authenticated: false).text
        let held = Self.gauge(metrics, #"tokenrelay_memory_cache_bytes{cache="tokens"}"#)
        #expect(held > 0 && held <= 768 * 1024, "\(held)")
        #expect(Self.gauge(metrics, #"tokenrelay_memory_cache_evictions{cache="tokens"}"#) > 0)
        let accountBytes = Self.gauge(metrics, #"tokenrelay_memory_cache_bytes{cache="accounts"}"#)
        #expect(accountBytes > 0 && accountBytes <= 256 * 1024, "\(accountBytes)")
        let kept = Int(Self.gauge(metrics, #"tokenrelay_memory_cache_entries{cache="tokens"}"#))
        #expect(kept > 0 && kept < accounts.count, "\(kept)")

        // The first accounts asked for went first; their tokens come from PostgreSQL, with no STS call.
        let databaseHits = #"tokenrelay_token_cache_total{layer="database",outcome="hit"}"#
        let before = try await stack.emulatorCount("token_requests")
        for account in accounts.prefix(20) {
            let answer = try await silent(account)
            #expect(answer.status == 200 && answer.json["source"] as? String == "cache", "\(answer.text.prefix(200))")
        }
        #expect(try await stack.emulatorCount("token_requests") == before)
        let after = try await stack.request("GET", "/metrics", authenticated: false).text
        #expect(Self.gauge(after, databaseHits) - Self.gauge(metrics, databaseHits) == 20)
        #expect(Self.gauge(after, #"tokenrelay_memory_cache_bytes{cache="tokens"}"#) <= 768 * 1024)
        // Brought back: the same request again is a memory hit.
        let last = try await silent(accounts[19])
        #expect(last.status == 200 && last.json["source"] as? String == "cache")
        let final = try await stack.request("GET", "/metrics", authenticated: false).text
        #expect(Self.gauge(final, databaseHits) == Self.gauge(after, databaseHits), "served from memory, not PostgreSQL")
    }
}
