import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// The walking skeleton end to end on real parts: PostgreSQL, the built `sts-emulator` and the
/// built `token-relay`, over HTTP on loopback.
@Suite("Sign-in, silent tokens and Graph, end to end", .serialized)
struct SignInAndSilentTokenTests {
    @Test("A user signs in through the authority and becomes an account with home_account_id from client_info")
    func signInCreatesAccount() async throws {
        let stack = try await TokenRelayStack(name: "e2e_signin")
        defer { stack.stop() }
        let result = try await stack.signIn("alice@contoso.example")
        let account = try #require(result["account"] as? [String: Any])
        #expect(account["username"] as? String == "alice@contoso.example")
        #expect(account["realm"] as? String == stack.tenantId)
        #expect(account["state"] as? String == "active")
        #expect(account["authority_type"] as? String == "aad")
        let home = try #require(account["home_account_id"] as? String)
        #expect(home.hasSuffix("." + stack.tenantId))
        #expect(home == "\(account["local_account_id"] as? String ?? "").\(stack.tenantId)")

        let id = try #require(account["account_id"] as? String)
        let fetched = try await stack.request("GET", "/v1/accounts/\(id)")
        #expect(fetched.status == 200)
        #expect(fetched.json["account_id"] as? String == id)

        // Signing in again keeps the same account id.
        let again = try await stack.signIn("alice@contoso.example")
        #expect((again["account"] as? [String: Any])?["account_id"] as? String == id)
    }

    @Test("The token from sign-in is served from cache; force_refresh redeems and rotates the refresh token")
    func silentCacheThenRefresh() async throws {
        let stack = try await TokenRelayStack(name: "e2e_silent")
        defer { stack.stop() }
        let account = try #require(try await stack.signIn("alice@contoso.example")["account"] as? [String: Any])
        let id = try #require(account["account_id"] as? String)

        let cached = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
        #expect(cached.status == 200, "\(cached.text)")
        #expect(cached.json["source"] as? String == "cache")
        #expect(cached.json["token_type"] as? String == "Bearer")
        #expect(cached.json["scopes"] as? [String] == ["User.Read"])
        #expect(cached.json["refresh_token"] == nil)
        let firstToken = try #require(cached.json["access_token"] as? String)
        #expect((cached.json["expires_on"] as? Int ?? 0) > Int(Date().timeIntervalSince1970) + 300)

        let before = try await stack.emulatorCount("token_requests")
        let refreshed = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(refreshed.status == 200, "\(refreshed.text)")
        #expect(refreshed.json["source"] as? String == "refresh")
        #expect(refreshed.json["access_token"] as? String != firstToken)
        // A second forced refresh only works if the rotated refresh token was stored (the
        // emulator enforces strict rotation).
        let second = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(second.status == 200, "\(second.text)")
        let after = try await stack.emulatorCount("token_requests")
        #expect(after - before == 2)

        // By username and by home_account_id too.
        let byName = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["username": "ALICE@contoso.example", "scopes": ["https://graph.microsoft.com/user.read"]])
        #expect(byName.status == 200, "\(byName.text)")
        #expect(byName.json["source"] as? String == "cache")
        let byHome = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["home_account_id": account["home_account_id"] as? String ?? "", "scopes": ["User.Read"]])
        #expect(byHome.status == 200)
    }

    @Test("A new token replaces cached entries whose scopes it overlaps; a superset serves narrower requests")
    func overlappingEntriesReplaced() async throws {
        let stack = try await TokenRelayStack(name: "e2e_overlap")
        defer { stack.stop() }
        let account = try #require(try await stack.signIn("alice@contoso.example")["account"] as? [String: Any])
        let id = try #require(account["account_id"] as? String)
        let wide = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read", "Mail.Read"], "force_refresh": true])
        #expect(wide.status == 200, "\(wide.text)")
        #expect(wide.json["scopes"] as? [String] == ["Mail.Read", "User.Read"])
        let targets = try await stack.withDatabase { connection in
            try connection.query("SELECT target FROM access_tokens WHERE account_id = $1", [.text(id)]).rows.compactMap { $0.string("target") }
        }
        #expect(targets == ["mail.read user.read"])
        let narrow = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["mail.read"]])
        #expect(narrow.json["source"] as? String == "cache")
        #expect(narrow.json["access_token"] as? String == wide.json["access_token"] as? String)
    }

    @Test("Past refresh_on the cached token is served while one background refresh replaces it; last_used_at is recorded")
    func proactiveRefresh() async throws {
        let stack = try await TokenRelayStack(name: "e2e_proactive")
        defer { stack.stop() }
        // refresh_in 0: the sign-in's token is due for refresh at once (no sleeping).
        _ = try await stack.control("POST", "/_control/users/alice@contoso.example", json: ["refresh_in": 0])
        let account = try #require(try await stack.signIn("alice@contoso.example")["account"] as? [String: Any])
        let id = try #require(account["account_id"] as? String)
        #expect(account["last_used_at"] is NSNull)
        _ = try await stack.control("POST", "/_control/users/alice@contoso.example", json: ["refresh_in": NSNull()])
        let before = try await stack.emulatorCount("token_requests")

        let served = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
        #expect(served.status == 200)
        #expect(served.json["source"] as? String == "cache")
        let first = try #require(served.json["access_token"] as? String)

        var replaced: String?
        for _ in 0..<50 where replaced == nil {
            try await Task.sleep(for: .milliseconds(100))  // polling for the background work, not for expiry
            let again = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
            #expect(again.json["source"] as? String == "cache")
            if let token = again.json["access_token"] as? String, token != first { replaced = token }
        }
        #expect(replaced != nil, "no background refresh replaced the token")
        #expect(try await stack.emulatorCount("token_requests") == before + 1)
        let used = try await stack.request("GET", "/v1/accounts/\(id)")
        #expect(used.json["last_used_at"] is String)
    }

    @Test("Concurrent requests for an expired token make one STS call")
    func coalescedRefresh() async throws {
        let stack = try await TokenRelayStack(name: "e2e_coalesce")
        defer { stack.stop() }
        // A token issued with expires_in ≤ expiry_skew is expired on arrival: no sleeping.
        _ = try await stack.control("POST", "/_control/users/bob@contoso.example", json: ["expires_in": 120])
        let account = try #require(try await stack.signIn("bob@contoso.example")["account"] as? [String: Any])
        let id = try #require(account["account_id"] as? String)
        // The refreshed token lives long, so every request either joins the one refresh or hits the cache.
        _ = try await stack.control("POST", "/_control/users/bob@contoso.example", json: ["expires_in": 3600])
        let before = try await stack.emulatorCount("token_requests")
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<40 {
                group.addTask {
                    try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]]).status
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.allSatisfy { $0 == 200 })
        let after = try await stack.emulatorCount("token_requests")
        #expect(after - before == 1)
    }

    @Test("A revoked refresh token puts the account in interaction_required, durably, without further STS calls")
    func deadRefreshToken() async throws {
        let stack = try await TokenRelayStack(name: "e2e_dead")
        defer { stack.stop() }
        let account = try #require(try await stack.signIn("alice@contoso.example")["account"] as? [String: Any])
        let id = try #require(account["account_id"] as? String)
        _ = try await stack.control("POST", "/_control/users/alice@contoso.example", json: ["revoke_refresh_tokens": true])

        let refused = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(refused.status == 409, "\(refused.text)")
        #expect(refused.headers["Content-Type"] == "application/problem+json")
        #expect(refused.json["error"] as? String == "interaction_required")
        #expect(refused.json["type"] as? String == "urn:tokenrelay:problem:interaction_required")
        #expect(refused.json["sts_error_codes"] as? [Int] == [50173])
        #expect(refused.json["account_state"] as? String == "interaction_required")

        let before = try await stack.emulatorCount("token_requests")
        let again = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["Mail.Read"]])
        #expect(again.status == 409)
        #expect(again.json["error"] as? String == "interaction_required")
        let after = try await stack.emulatorCount("token_requests")
        #expect(after == before)
        let fetched = try await stack.request("GET", "/v1/accounts/\(id)")
        #expect(fetched.json["state"] as? String == "interaction_required")

        // A new sign-in makes the account active again.
        _ = try await stack.control("POST", "/_control/users/alice@contoso.example", json: ["revoke_refresh_tokens": false])
        _ = try await stack.signIn("alice@contoso.example")
        let recovered = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(recovered.status == 200, "\(recovered.text)")
    }

    @Test("GET /v1/downstream/graph/me calls Graph with the account's token and relays the answer")
    func graphMe() async throws {
        let stack = try await TokenRelayStack(name: "e2e_graph")
        defer { stack.stop() }
        let account = try #require(try await stack.signIn("alice@contoso.example")["account"] as? [String: Any])
        let id = try #require(account["account_id"] as? String)
        let me = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id])
        #expect(me.status == 200, "\(me.text)")
        #expect(me.headers["TokenRelay-Relayed"] == "true")
        #expect(me.json["userPrincipalName"] as? String == "alice@contoso.example")
        #expect(me.json["id"] as? String == account["local_account_id"] as? String)

        let noIdentity = try await stack.request("GET", "/v1/downstream/graph/me")
        #expect(noIdentity.status == 400)
        #expect(noIdentity.json["field"] as? String == "X-Account-Id")
        let unknownAPI = try await stack.request("GET", "/v1/downstream/nosuchapi/me", headers: ["X-Account-Id": id])
        #expect(unknownAPI.status == 404)
        let unknownAccount = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": "acc_missing"])
        #expect(unknownAccount.status == 404)
        #expect(unknownAccount.json["error"] as? String == "account_not_found")
    }

    @Test("Tokens, secrets and the API key never reach the service log")
    func logsHoldNoSecrets() async throws {
        let stack = try await TokenRelayStack(name: "e2e_logs")
        defer { stack.stop() }
        let account = try #require(try await stack.signIn("alice@contoso.example")["account"] as? [String: Any])
        let id = try #require(account["account_id"] as? String)
        let token = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        let accessToken = try #require(token.json["access_token"] as? String)
        _ = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id])
        let log = stack.relay.log()
        #expect(!log.isEmpty)
        #expect(!log.contains(accessToken))
        #expect(!log.contains(stack.clientSecret))
        #expect(!log.contains(stack.apiKey))
        #expect(!log.contains("alice@contoso.example"))

        // A database dump shows no token: only ciphertexts are stored (behaviour §7).
        let dump = try await stack.withDatabase { connection in
            try ["accounts", "refresh_tokens", "access_tokens", "sign_ins"].map { table in
                try connection.query("SELECT row_to_json(t)::text AS row FROM \(table) t").rows.compactMap { $0.string("row") }.joined()
            }.joined()
        }
        #expect(dump.contains("ciphertext"))
        #expect(!dump.contains(accessToken))
        #expect(!dump.contains(String(accessToken.prefix(40))))
    }
}
