import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// The audit trail read back (behaviour §12 Audit; issue 28 part 5): `GET /v1/audit` with its
/// cursor and filters, `token-relay audit export`, `TOKENRELAY_AUDIT_RETENTION_DAYS`, and the
/// provenance of every access token by its `uti`.
@Suite("Audit trail and token provenance", .serialized)
struct AuditTrailTests {
    static func get(_ stack: TokenRelayStack, _ query: String, key: String? = nil) async throws -> TestResponse {
        try await stack.request("GET", "/v1/audit" + query, headers: key.map(StackHelpers.bearer) ?? [:], authenticated: key == nil)
    }

    static func events(_ response: TestResponse) -> [[String: Any]] { response.json["audit_events"] as? [[String: Any]] ?? [] }

    /// The `uti` claim of a JWS access token (the test reads the payload; the relay never shows it).
    static func uti(of accessToken: String) throws -> String {
        let parts = accessToken.split(separator: ".")
        var payload = String(parts[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while payload.count % 4 != 0 { payload += "=" }
        let bytes = try #require(Data(base64Encoded: payload))
        let claims = try #require(try JSONSerialization.jsonObject(with: bytes) as? [String: Any])
        return try #require(claims["uti"] as? String)
    }

    @Test("GET /v1/audit pages oldest first by cursor, filters by actor, action, account and time, and names every bad value")
    func routeFiltersAndCursor() async throws {
        let stack = try await TokenRelayStack(name: "e2e_audit_route")
        defer { stack.stop() }
        let alice = try await stack.signInAccountId("alice@contoso.example")
        let bob = try await stack.signInAccountId("bob@contoso.example")
        #expect(try await stack.request("DELETE", "/v1/accounts/\(alice)").status == 204)
        let reader = try await StackHelpers.createKey(stack, name: "reader", permissions: ["accounts:read", "tokens:acquire"])
        let limited = try await StackHelpers.createKey(stack, name: "limited", permissions: ["admin"], tenants: [stack.tenantId])

        // Every row, two a page, in the order written.
        var rows: [[String: Any]] = []
        var query = "?limit=2"
        for _ in 0..<10 {
            let page = try await Self.get(stack, query)
            #expect(page.status == 200, "\(page.text)")
            #expect(Self.events(page).count <= 2)
            rows += Self.events(page)
            guard let next = page.json["next_cursor"] as? String else { break }
            query = "?limit=2&cursor=\(next)"
        }
        let stored = try await stack.withDatabase { try $0.query("SELECT count(*) AS n FROM audit_events").rows.first?.int("n") }
        #expect(rows.count == Int(stored ?? -1) && rows.count == 5, "\(rows)")
        let ids = rows.compactMap { $0["id"] as? Int }
        #expect(ids == ids.sorted() && Set(ids).count == ids.count)
        let actions = rows.map { $0["action"] as? String }
        #expect(actions == ["sign_in.completed", "sign_in.completed", "account.deleted", "api_key.created", "api_key.created"])
        #expect(rows.allSatisfy { ($0["occurred_at"] as? String)?.hasSuffix("Z") == true && $0["detail"] is [String: Any] })

        // Filters.
        #expect(Self.events(try await Self.get(stack, "?actor=cli")).map { $0["action"] as? String } == ["api_key.created", "api_key.created"])
        #expect(Self.events(try await Self.get(stack, "?actor=\(stack.apiKeyId)")).count == 3)
        let deleted = Self.events(try await Self.get(stack, "?action=account.deleted"))
        #expect(deleted.map { $0["account_id"] as? String } == [alice])
        #expect(Self.events(try await Self.get(stack, "?account_id=\(bob)")).map { $0["action"] as? String } == ["sign_in.completed"])
        #expect(Self.events(try await Self.get(stack, "?account_id=\(alice)&action=sign_in.completed")).count == 1)
        #expect(Self.events(try await Self.get(stack, "?since=2000-01-01T00:00:00Z&until=2999-01-01T00:00:00%2B01:00")).count == 5)
        #expect(Self.events(try await Self.get(stack, "?since=2999-01-01T00:00:00Z")).isEmpty)
        #expect(Self.events(try await Self.get(stack, "?until=2000-01-01T00:00:00.5Z")).isEmpty)
        // A filtered page ends with no cursor; a cursor from a filtered page goes on within the filter.
        let firstCli = try await Self.get(stack, "?actor=cli&limit=1")
        let next = try #require(firstCli.json["next_cursor"] as? String)
        let secondCli = try await Self.get(stack, "?actor=cli&limit=1&cursor=\(next)")
        #expect(Self.events(secondCli).map { $0["actor"] as? String } == ["cli"])
        #expect(secondCli.json["next_cursor"] is NSNull)

        // Bad values: 400 problem+json naming the parameter.
        for (query, field) in [
            ("?limit=0", "limit"), ("?cursor=nonsense", "cursor"), ("?cursor=\(next.dropLast(2))", "cursor"), ("?action=account.exploded", "action"),
            ("?since=yesterday", "since"), ("?until=2026-12-05", "until"), ("?since=2026-12-05T00:00:00Z&until=2026-12-04T00:00:00Z", "until"),
            ("?actor=", "actor"), ("?account_id=a%01b", "account_id"), ("?actor=a&actor=b", "actor"), ("?who=me", "who"),
            ("?uti=not%20a%20uti", "uti"), ("?uti=abcDEF123_-&actor=cli", "actor"),
        ] {
            let refused = try await Self.get(stack, query)
            #expect(refused.status == 400, "\(query): \(refused.text)")
            #expect(refused.headers["Content-Type"]?.hasPrefix("application/problem+json") == true, "\(query)")
            #expect(refused.json["field"] as? String == field, "\(query): \(refused.text)")
        }
        let unknown = try await Self.get(stack, "?uti=abcDEF123_-")
        #expect(unknown.status == 404 && unknown.json["error"] as? String == "not_found", "\(unknown.text)")

        // admin only, and not for a key limited to tenants.
        let forbidden = try await Self.get(stack, "", key: reader.key)
        #expect(forbidden.status == 403 && forbidden.json["error"] as? String == "forbidden", "\(forbidden.text)")
        #expect(try await Self.get(stack, "", key: limited.key).status == 403)
        #expect(try await stack.request("GET", "/v1/audit", authenticated: false).status == 401)
    }

    @Test("A refreshed token's uti names its account, scopes, expiry and the key that caused it; a cached answer to another key adds it once flushed")
    func tokenProvenance() async throws {
        let stack = try await TokenRelayStack(name: "e2e_audit_uti", environment: ["TOKENRELAY_ISSUANCE_FLUSH_INTERVAL_S": "1"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let first = try await StackHelpers.createKey(stack, name: "first", permissions: ["tokens:acquire"])
        let second = try await StackHelpers.createKey(stack, name: "second", permissions: ["tokens:acquire"])
        func silent(_ key: String, force: Bool) async throws -> TestResponse {
            try await stack.request(
                "POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": force],
                headers: StackHelpers.bearer(key), authenticated: false)
        }
        let refreshed = try await silent(first.key, force: true)
        #expect(refreshed.status == 200 && refreshed.json["source"] as? String == "refresh", "\(refreshed.text)")
        let accessToken = try #require(refreshed.json["access_token"] as? String)
        let uti = try Self.uti(of: accessToken)

        // Provenance is written with the token, before any flush.
        let recorded = try await Self.get(stack, "?uti=\(uti)")
        #expect(recorded.status == 200, "\(recorded.text)")
        #expect(recorded.json["uti"] as? String == uti)
        #expect(recorded.json["account_id"] as? String == id)
        #expect(recorded.json["obtained_by"] as? String == first.keyId)
        #expect((recorded.json["scopes"] as? [String])?.contains("User.Read") == true, "\(recorded.text)")
        #expect((recorded.json["expires_at"] as? String)?.hasSuffix("Z") == true && (recorded.json["obtained_at"] as? String)?.hasSuffix("Z") == true)

        let cached = try await silent(second.key, force: false)
        #expect(cached.status == 200 && cached.json["source"] as? String == "cache", "\(cached.text)")
        let cachedToken = try #require(cached.json["access_token"] as? String)
        #expect(try Self.uti(of: cachedToken) == uti)
        var receivers: [String: Int] = [:]
        for _ in 0..<150 {
            let answer = try await Self.get(stack, "?uti=\(uti)")
            receivers = Dictionary(
                uniqueKeysWithValues: (answer.json["received_by"] as? [[String: Any]] ?? []).map { ($0["key_id"] as? String ?? "", $0["count"] as? Int ?? 0) })
            if receivers == [first.keyId: 1, second.keyId: 1] { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(receivers == [first.keyId: 1, second.keyId: 1])
        // The sign-in's own token was recorded too, obtained by the key that started the sign-in.
        let signInToken = try await stack.withDatabase { connection in
            try connection.query("SELECT obtained_by FROM token_provenance WHERE uti <> $1", [.text(uti)]).rows.map { $0.string("obtained_by") }
        }
        #expect(signInToken == [stack.apiKeyId])
        // So is an app token, under its owner.
        let app = try await stack.request(
            "POST", "/v1/tokens/app", json: ["scopes": ["https://graph.microsoft.com/.default"]], headers: StackHelpers.bearer(first.key),
            authenticated: false)
        #expect(app.status == 200, "\(app.text)")
        let appToken = try #require(app.json["access_token"] as? String)
        let appRecord = try await Self.get(stack, "?uti=\(try Self.uti(of: appToken))")
        #expect(appRecord.json["account_id"] as? String == "app:\(stack.tenantId)" && appRecord.json["obtained_by"] as? String == first.keyId)
    }

    @Test("audit export --since prints the rows since then as JSON lines, the objects GET /v1/audit lists; a bad time is a usage error")
    func export() async throws {
        let stack = try await TokenRelayStack(name: "e2e_audit_export")
        defer { stack.stop() }
        _ = try await stack.signInAccountId("alice@contoso.example")
        _ = try await stack.signInAccountId("bob@contoso.example")
        try await stack.withDatabase { connection in
            _ = try connection.query("UPDATE audit_events SET occurred_at = '2026-01-01T00:00:00Z' WHERE id = (SELECT min(id) FROM audit_events)")
        }
        let listed = Self.events(try await Self.get(stack, "?since=2026-06-01T00:00:00Z"))
        #expect(listed.count == 1)
        let run = try await KeepAliveAndEventsTests.tokenRelay(["audit", "export", "--since", "2026-06-01T00:00:00Z"], environment: stack.environment)
        #expect(run.status == 0, "\(run.error)")
        let lines = run.output.split(separator: "\n").map { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(lines.count == 1)
        #expect(lines.first??["id"] as? Int == listed.first?["id"] as? Int)
        #expect(lines.first??["action"] as? String == "sign_in.completed")
        #expect(run.error.contains(#""command":"audit export""#), "progress on standard error: \(run.error)")
        let all = try await KeepAliveAndEventsTests.tokenRelay(["audit", "export", "--since", "2000-01-01T00:00:00Z"], environment: stack.environment)
        #expect(all.output.split(separator: "\n").count == 2)

        let bad = try await KeepAliveAndEventsTests.tokenRelay(["audit", "export", "--since", "last week"], environment: stack.environment)
        #expect(bad.status == 2 && bad.error.contains("--since"), "\(bad.error)")
        let missing = try await KeepAliveAndEventsTests.tokenRelay(["audit", "export"], environment: stack.environment)
        #expect(missing.status == 2, "\(missing.error)")
    }

    @Test("TOKENRELAY_AUDIT_RETENTION_DAYS: the keep-alive pass deletes audit rows, token provenance and receipts older than it; 0 keeps them")
    func retention() async throws {
        let stack = try await TokenRelayStack(name: "e2e_audit_retention", environment: ["TOKENRELAY_ISSUANCE_FLUSH_INTERVAL_S": "1"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId("alice@contoso.example")
        _ = try await stack.signInAccountId("bob@contoso.example")
        #expect(try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]]).status == 200)
        func count(_ table: String) async throws -> Int64 {
            try await stack.withDatabase { try $0.query("SELECT count(*) AS n FROM \(table)").rows.first?.int("n") ?? -1 }
        }
        for _ in 0..<100 where try await count("token_receipts") == 0 { try await Task.sleep(for: .milliseconds(100)) }
        #expect(try await count("token_receipts") == 1)
        #expect(try await count("token_provenance") == 2)
        #expect(try await count("audit_events") == 2)
        // Alice's sign-in and token ten days old; bob's recent.
        try await stack.withDatabase { connection in
            _ = try connection.query("UPDATE audit_events SET occurred_at = now() - interval '10 days' WHERE account_id = $1", [.text(id)])
            _ = try connection.query("UPDATE token_provenance SET obtained_at = now() - interval '10 days' WHERE account_id = $1", [.text(id)])
            _ = try connection.query("UPDATE token_receipts SET last_at = now() - interval '10 days' WHERE account_id = $1", [.text(id)])
        }
        #expect(try await KeepAliveAndEventsTests.keepAlivePass(stack, ["TOKENRELAY_AUDIT_RETENTION_DAYS": "0"])["pruned_audit"] as? Int == 0)
        #expect(try await KeepAliveAndEventsTests.keepAlivePass(stack, ["TOKENRELAY_AUDIT_RETENTION_DAYS": "11"])["pruned_audit"] as? Int == 0)
        #expect(try await KeepAliveAndEventsTests.keepAlivePass(stack, ["TOKENRELAY_AUDIT_RETENTION_DAYS": "7"])["pruned_audit"] as? Int == 3)
        #expect(try await count("token_receipts") == 0)
        #expect(try await count("token_provenance") == 1)
        let left = try await stack.withDatabase { try $0.query("SELECT account_id FROM audit_events").rows.map { $0.string("account_id") } }
        #expect(left.count == 1 && left.first != id)
        let refused = try await KeepAliveAndEventsTests.tokenRelay(
            ["check-config"], environment: stack.environment.merging(["TOKENRELAY_AUDIT_RETENTION_DAYS": "-1"]) { $1 })
        #expect(refused.status == 2 && refused.error.contains("TOKENRELAY_AUDIT_RETENTION_DAYS"), "\(refused.error)")
    }
}
