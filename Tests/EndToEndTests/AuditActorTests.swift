import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// Every audit row names who did it (behaviour §12 Audit: "who: key id"; issue 10 item 7): the
/// `keyid` of `trk_<keyid>_<secret>` for API calls, the bootstrap key's too (issue 33 item 5),
/// `cli` for the command line.
@Suite("Audit rows name the caller's key id", .serialized)
struct AuditActorTests {
    /// The audit rows as (action, actor, account_id, outcome), oldest first.
    static func audit(_ stack: TokenRelayStack) async throws -> [(action: String, actor: String, accountId: String?, outcome: String)] {
        try await stack.withDatabase { connection in
            try connection.query("SELECT action, actor, account_id, outcome FROM audit_events ORDER BY id").rows.map {
                ($0.string("action") ?? "", $0.string("actor") ?? "", $0.string("account_id"), $0.string("outcome") ?? "")
            }
        }
    }

    /// Signs `username` in with the API key `key`: POST /v1/sign-ins, the emulator's authorize, the callback.
    static func signIn(_ stack: TokenRelayStack, _ username: String, key: String) async throws -> String {
        let started = try await stack.request(
            "POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": username], headers: ["Authorization": "Bearer \(key)"],
            authenticated: false)
        let authorize = try #require(started.json["authorize_url"] as? String, "\(started.text)")
        let redirect = try await stack.http.execute(.init(method: "GET", url: authorize))
        let callback = try await stack.request("GET", try #require(redirect.headers["Location"]), authenticated: false)
        #expect(callback.status == 200, "\(callback.text)")
        return try #require((callback.json["account"] as? [String: Any])?["account_id"] as? String)
    }

    @Test("Sign-in, import, the import's first use and deletion name the API key; key and encryption commands name cli")
    func everyRowNamesItsActor() async throws {
        let stack = try await TokenRelayStack(name: "e2e_audit_actor")
        defer { stack.stop() }
        let cli = StackHelpers.cliEnvironment(stack)
        let (status, output) = try await CommandLineTests.run(["api-keys", "create", "--name", "writer", "--permissions", "admin"], environment: cli)
        #expect(status == 0, "\(output)")
        let created = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        let key = try #require(created["api_key"] as? String)
        let keyId = try #require(created["key_id"] as? String)
        try await StackHelpers.awaitKnown(key, on: [stack.baseURL], stack)
        let auth = ["Authorization": "Bearer \(key)"]

        // Through the API with the created key.
        let alice = try await Self.signIn(stack, "alice@contoso.example", key: key)
        let adal = try await stack.adalRefreshToken(for: "bob@contoso.example")
        let imported = try await stack.request(
            "POST", "/v1/accounts/import",
            json: ["username": "bob@contoso.example", "refresh_token": adal, "authority": "\(stack.emulator.baseURL)/\(stack.tenantId)"], headers: auth,
            authenticated: false)
        #expect(imported.status == 201, "\(imported.text)")
        let bob = try #require(imported.json["account_id"] as? String)
        let first = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": bob, "scopes": ["User.Read"]], headers: auth, authenticated: false)
        #expect(first.status == 200, "\(first.text)")
        #expect(try await stack.request("DELETE", "/v1/accounts/\(alice)", headers: auth, authenticated: false).status == 204)
        // With the bootstrap key.
        let erin = try await Self.signIn(stack, "erin@contoso.example", key: stack.apiKey)
        #expect(try await stack.request("DELETE", "/v1/accounts/\(erin)").status == 204)
        // The command line.
        #expect(try await CommandLineTests.run(["accounts", "delete", bob], environment: stack.environment).0 == 0)
        #expect(try await CommandLineTests.run(["api-keys", "revoke", keyId], environment: cli).0 == 0)
        #expect(try await CommandLineTests.run(["encryption", "rotate"], environment: stack.environment).0 == 0)

        let rows = try await Self.audit(stack)
        func actors(_ action: String, _ account: String? = nil) -> [String] {
            rows.filter { $0.action == action && (account == nil || $0.accountId == account) }.map(\.actor)
        }
        #expect(actors("api_key.created") == ["cli"])
        #expect(actors("sign_in.completed", alice) == [keyId])
        #expect(actors("account.imported", bob) == [keyId])
        #expect(actors("account.import_completed", bob) == [keyId])
        #expect(actors("account.deleted", alice) == [keyId])
        // The bootstrap key (`trk_bootstrap0_…`) by its key id, as any key.
        #expect(actors("sign_in.completed", erin) == [stack.apiKeyId])
        #expect(actors("account.deleted", erin) == [stack.apiKeyId])
        #expect(actors("account.deleted", bob) == ["cli"])
        #expect(actors("api_key.revoked") == ["cli"])
        #expect(actors("encryption.rotated") == ["cli"])
        // One row per operation, none without a named actor.
        #expect(rows.count == 10, "\(rows)")
        for row in rows {
            #expect([keyId, stack.apiKeyId, "cli"].contains(row.actor), "\(row)")
        }
    }
}
