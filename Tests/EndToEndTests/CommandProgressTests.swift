import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// Long commands show progress on standard error (JSON lines when it is not a terminal) and
/// `tenants forget --dry-run` says what would go (issue 28 part 3), on the built binaries.
@Suite("Command progress and tenants forget --dry-run, end to end", .serialized)
struct CommandProgressEndToEndTests {
    static let contoso = TenantSuspensionTests.contoso

    /// The progress objects a command wrote to standard error, in order.
    static func progress(_ error: String) -> [[String: Any]] {
        error.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], object["event"] as? String == "progress"
            else { return nil }
            return object
        }
    }

    /// The lines of `phase`: the first (done 0) and the last (finished).
    static func phase(_ lines: [[String: Any]], _ name: String) -> (first: [String: Any], last: [String: Any])? {
        let of = lines.filter { $0["phase"] as? String == name }
        guard let first = of.first, let last = of.last, last["finished"] as? Bool == true else { return nil }
        return (first, last)
    }

    static func count(_ stack: TokenRelayStack, _ sql: String) async throws -> Int64 {
        try await stack.withDatabase { try $0.query(sql).rows.first?.int("n") ?? -1 }
    }

    @Test("tenants forget --dry-run lists what would go and deletes nothing; the real run deletes exactly that, telling its progress")
    func forgetDryRunAndProgress() async throws {
        let stack = try await TokenRelayStack(name: "e2e_forget_dry_run")
        defer { stack.stop() }
        let alice = try await stack.signInAccountId("alice@contoso.example")
        let bob = try await stack.signInAccountId("bob@contoso.example")
        for account in [alice, bob] {
            #expect(try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": account, "scopes": ["User.Read"]]).status == 200)
        }
        let dataKey = try #require(try await TenantDataKeyTests.dataKeyId(stack, tenant: Self.contoso))
        let accountsBefore = try await Self.count(stack, "SELECT count(*) AS n FROM accounts")

        let dry = try await BuiltProducts.run("token-relay", ["tenants", "forget", Self.contoso, "--dry-run"], environment: stack.environment)
        #expect(dry.status == 0, "\(dry.error)")
        let plan = try #require(try JSONSerialization.jsonObject(with: Data(dry.output.utf8)) as? [String: Any], "\(dry.output)")
        #expect(plan["dry_run"] as? Bool == true && plan["tenant_id"] as? String == Self.contoso)
        #expect(plan["accounts_to_delete"] as? Int == 2)
        #expect(plan["account_ids"] as? [String] == [alice, bob].sorted())
        #expect(plan["data_key_to_destroy"] as? String == dataKey)
        #expect((plan["token_rows"] as? [String: Int])?.keys.sorted() == ["access_tokens", "grant_access_tokens", "obo_refresh_tokens"])
        // Nothing went: the accounts, the data key, the answers; no audit row, no event.
        #expect(try await Self.count(stack, "SELECT count(*) AS n FROM accounts") == accountsBefore)
        #expect(try await TenantDataKeyTests.dataKeyId(stack, tenant: Self.contoso) == dataKey)
        #expect(try await Self.count(stack, "SELECT count(*) AS n FROM audit_events WHERE action = 'tenant.forgotten'") == 0)
        #expect(try await Self.count(stack, "SELECT count(*) AS n FROM account_events WHERE type = 'account.deleted'") == 0)
        #expect(try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": alice, "scopes": ["User.Read"]]).status == 200)

        let run = try await BuiltProducts.run("token-relay", ["tenants", "forget", Self.contoso, "--yes"], environment: stack.environment)
        #expect(run.status == 0, "\(run.error)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any], "\(run.output)")
        #expect(report["accounts_deleted"] as? Int == plan["accounts_to_delete"] as? Int)
        #expect(report["token_rows_deleted"] as? Int == plan["token_rows_to_delete"] as? Int)
        #expect(report["data_key_destroyed"] as? String == dataKey)
        // Standard output is the result alone; the progress went to standard error.
        #expect(run.output.split(separator: "\n").count == 1)
        let accounts = try #require(Self.phase(Self.progress(run.error), "accounts"), "\(run.error)")
        #expect(accounts.first["command"] as? String == "tenants forget")
        #expect(accounts.first["done"] as? Int == 0 && accounts.first["total"] as? Int == 2)
        #expect(accounts.last["done"] as? Int == 2 && accounts.last["percent"] as? Int == 100 && accounts.last["eta_s"] as? Int == 0)

        // A dry run of a tenant with nothing left says so.
        let empty = try await BuiltProducts.run("token-relay", ["tenants", "forget", Self.contoso, "--dry-run"], environment: stack.environment)
        let nothing = try #require(try JSONSerialization.jsonObject(with: Data(empty.output.utf8)) as? [String: Any])
        #expect(nothing["accounts_to_delete"] as? Int == 0 && nothing["data_key_to_destroy"] is NSNull && nothing["token_rows_to_delete"] as? Int == 0)
    }

    @Test("encryption rotate and rewrap, and keepalive --once, tell each phase with counts on standard error")
    func rotateRewrapKeepAliveProgress() async throws {
        let stack = try await TokenRelayStack(name: "e2e_command_progress")
        defer { stack.stop() }
        let alice = try await stack.signInAccountId("alice@contoso.example")
        #expect(try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": alice, "scopes": ["User.Read"]]).status == 200)

        // A new first key: contoso's data key is wrapped by the old one; the rows are under the data key.
        let old = try #require(stack.environment["TOKENRELAY_ENCRYPTION_KEYS"])
        let newKey = "k2:" + Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        let ring = stack.environment.merging(["TOKENRELAY_ENCRYPTION_KEYS": newKey + "," + old]) { $1 }
        let rotate = try await BuiltProducts.run("token-relay", ["encryption", "rotate"], environment: ring)
        #expect(rotate.status == 0, "\(rotate.error)")
        let lines = Self.progress(rotate.error)
        let dataKeys = try #require(Self.phase(lines, "data_keys"), "\(rotate.error)")
        #expect(dataKeys.first["command"] as? String == "encryption rotate")
        #expect(dataKeys.first["total"] as? Int == 1 && dataKeys.last["done"] as? Int == 1)
        let result = try #require(try JSONSerialization.jsonObject(with: Data(rotate.output.utf8)) as? [String: Any], "\(rotate.output)")
        for table in (result["tables"] as? [String: Any] ?? [:]).keys {
            #expect(Self.phase(lines, table) != nil, "no progress for \(table): \(rotate.error)")
        }

        let rewrap = try await BuiltProducts.run("token-relay", ["encryption", "rewrap"], environment: ring)
        #expect(rewrap.status == 0, "\(rewrap.error)")
        let nothing = try #require(Self.phase(Self.progress(rewrap.error), "data_keys"), "\(rewrap.error)")
        #expect(nothing.first["command"] as? String == "encryption rewrap" && nothing.first["total"] as? Int == 0 && nothing.last["percent"] as? Int == 100)

        try await KeepAliveAndEventsTests.age(stack, alice, days: 61)
        let keepAlive = try await BuiltProducts.run(
            "token-relay", ["keepalive", "--once"], environment: ring.merging(["TOKENRELAY_KEEPALIVE_MAX_PER_MINUTE": "6000"]) { $1 })
        #expect(keepAlive.status == 0, "\(keepAlive.error)")
        let keepAliveLines = Self.progress(keepAlive.error)
        #expect(Self.phase(keepAliveLines, "events") != nil, "\(keepAlive.error)")
        let accounts = try #require(Self.phase(keepAliveLines, "accounts"), "\(keepAlive.error)")
        #expect(accounts.first["command"] as? String == "keepalive" && accounts.first["total"] as? Int == 1 && accounts.last["done"] as? Int == 1)
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(keepAlive.output.utf8)) as? [String: Any], "\(keepAlive.output)")
        #expect(summary["refreshed"] as? Int == 1)
    }
}
