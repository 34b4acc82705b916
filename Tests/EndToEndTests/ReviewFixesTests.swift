import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// Defects found in review of the merged work; each test failed before its fix.
@Suite("Review fixes, end to end", .serialized)
struct ReviewFixesTests {
    @Test("An import whose first redemption cannot commit keeps the rotated refresh token")
    func importRotationSurvivesCommitFailure() async throws {
        let stack = try await TokenRelayStack(name: "e2e_import_commit_fail", emulatorArguments: ["--rotation-grace-seconds", "0"])
        defer { stack.stop() }
        let adalToken = try await stack.adalRefreshToken(for: "bob@contoso.example")
        let imported = try await stack.request(
            "POST", "/v1/accounts/import",
            json: ["username": "bob@contoso.example", "refresh_token": adalToken, "authority": "\(stack.emulator.baseURL)/organizations"])
        #expect(imported.status == 201, "\(imported.text)")
        let id = try #require(imported.json["account_id"] as? String)
        // A deferred constraint trigger fails the import's transaction at COMMIT, after the STS rotated.
        try await stack.withDatabase { connection in
            try connection.execute(
                """
                CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused at commit'; END $$;
                CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER UPDATE ON accounts
                  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse();
                """)
        }
        let first = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
        #expect(first.status != 200, "\(first.text)")
        try await stack.withDatabase { try $0.execute("DROP TRIGGER refuse_at_commit ON accounts") }
        // With no rotation grace only the newest refresh token works: the rotated one was stored.
        let second = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
        #expect(second.status == 200, "\(second.text)")
        #expect(stack.relay.log().contains("token.rotation_stored_on_retry"))
    }

    @Test("A tenant-limited key can neither import into a foreign tenant nor replace a foreign tenant's pending import")
    func importRespectsTenantLimits() async throws {
        let stack = try await TokenRelayStack(name: "e2e_import_tenants")
        defer { stack.stop() }
        let foreign = "\(stack.emulator.baseURL)/\(StackHelpers.otherTenant)"
        let victim = try await stack.request(
            "POST", "/v1/accounts/import", json: ["username": "victim@fabrikam.example", "refresh_token": "rt-victim", "authority": foreign])
        #expect(victim.status == 201, "\(victim.text)")
        let victimId = try #require(victim.json["account_id"] as? String)
        let limited = try await StackHelpers.createKey(stack, permissions: ["accounts:write", "accounts:read"], tenants: [stack.tenantId])
        let headers = StackHelpers.bearer(limited.key)

        let named = try await stack.request(
            "POST", "/v1/accounts/import", json: ["username": "victim@fabrikam.example", "refresh_token": "rt-attacker", "authority": foreign],
            headers: headers, authenticated: false)
        #expect(named.status == 403, "\(named.text)")
        #expect(named.json["field"] as? String == "authority")
        let own = try await stack.request(
            "POST", "/v1/accounts/import",
            json: ["username": "victim@fabrikam.example", "refresh_token": "rt-attacker", "authority": "\(stack.emulator.baseURL)/\(stack.tenantId)"],
            headers: headers, authenticated: false)
        #expect(own.status == 201, "\(own.text)")
        #expect(own.json["account_id"] as? String != victimId)
        let after = try await stack.request("GET", "/v1/accounts/\(victimId)")
        #expect(after.json["realm"] as? String == StackHelpers.otherTenant, "\(after.text)")
    }

    @Test("An import that revives an account in interaction_required writes account.recovered, in the merge and in a re-import")
    func importRevivalIsAnEvent() async throws {
        let stack = try await TokenRelayStack(name: "e2e_import_recovered")
        defer { stack.stop() }
        func silent(_ body: [String: Any]) async throws -> TestResponse { try await stack.request("POST", "/v1/tokens/silent", json: body) }
        func events(_ accountId: String) async throws -> [String] {
            let page = try await stack.request("GET", "/v1/events?limit=200")
            return (page.json["events"] as? [[String: Any]] ?? []).filter { $0["account_id"] as? String == accountId }.compactMap { $0["type"] as? String }
        }
        func killRefreshToken(_ accountId: String) async throws {
            _ = try await stack.control(
                "POST", "/_control/faults",
                json: ["endpoint": "token", "status": 400, "error": "invalid_grant", "error_codes": [700082], "suberror": "bad_token"])
            let dead = try await silent(["account_id": accountId, "scopes": ["User.Read"], "force_refresh": true])
            #expect(dead.json["account_state"] as? String == "interaction_required", "\(dead.text)")
        }
        func importBob() async throws -> String {
            let adalToken = try await stack.adalRefreshToken(for: "bob@contoso.example")
            let imported = try await stack.request(
                "POST", "/v1/accounts/import",
                json: [
                    "username": "bob@contoso.example", "refresh_token": adalToken,
                    "authority": "\(stack.emulator.baseURL)/\(stack.tenantId)",
                ])
            return try #require(imported.json["account_id"] as? String)
        }

        // Merge: the signed-in survivor's refresh token died, the import gives it a new one.
        let survivor = try await stack.signInAccountId("bob@contoso.example")
        try await killRefreshToken(survivor)
        let merged = try await silent(["account_id": try await importBob(), "scopes": ["User.Read"]])
        #expect(merged.status == 200, "\(merged.text)")
        #expect(try await events(survivor) == ["account.interaction_required", "account.recovered"])

        // Re-import: a pending import whose refresh token died gets a new one.
        #expect(try await stack.request("DELETE", "/v1/accounts/\(survivor)").status == 204)
        let pending = try await importBob()
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: ["endpoint": "token", "status": 400, "error": "invalid_grant", "error_codes": [700082], "suberror": "bad_token"])
        let dead = try await silent(["account_id": pending, "scopes": ["User.Read"]])
        #expect(dead.status == 409, "\(dead.text)")
        #expect(try await importBob() == pending)
        #expect(try await events(pending) == ["account.interaction_required", "account.recovered"])
    }

    @Test("After SIGHUP drops a key from the ring, sign-in links signed with it are refused and new links use the new key")
    func hangupRetiresLinkKeys() async throws {
        let file = TestLogs.directory + "/keyring-\(UUID().uuidString).txt"
        defer { try? FileManager.default.removeItem(atPath: file) }
        try Data("k1:\(EncryptionRotationTests.key())".utf8).write(to: URL(fileURLWithPath: file))
        let stack = try await TokenRelayStack(
            name: "e2e_sighup_links", environment: ["TOKENRELAY_ENCRYPTION_KEYS": "", "TOKENRELAY_ENCRYPTION_KEYS_FILE": file])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control("POST", "/_control/users/alice@contoso.example", json: ["revoke_refresh_tokens": true])
        let refused = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(refused.json["account_state"] as? String == "interaction_required", "\(refused.text)")
        let oldLink = try #require(refused.json["sign_in_url"] as? String)

        try Data("k2:\(EncryptionRotationTests.key())".utf8).write(to: URL(fileURLWithPath: file))
        let seen = stack.relay.log().components(separatedBy: "encryption.key_ring_reloaded").count
        stack.relay.send(signal: SIGHUP)
        for _ in 0..<100 where stack.relay.log().components(separatedBy: "encryption.key_ring_reloaded").count == seen {
            try await Task.sleep(for: .milliseconds(50))
        }
        let old = try await stack.request("GET", oldLink, authenticated: false)
        #expect(old.status == 403, "\(old.text)")
        #expect(old.json["field"] as? String == "sig")
        let again = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
        let newLink = try #require(again.json["sign_in_url"] as? String)
        #expect(try await stack.request("GET", newLink, authenticated: false).status == 302)
    }

    @Test("A body correlation_id does not lift API-key limits on app and on-behalf-of tokens")
    func correlationIdKeepsKeyLimits() async throws {
        let stack = try await TokenRelayStack(name: "e2e_grant_correlation_limits")
        defer { stack.stop() }
        let tenantLimited = try await StackHelpers.createKey(stack, permissions: ["tokens:acquire"], tenants: [StackHelpers.otherTenant])
        let scopeLimited = try await StackHelpers.createKey(stack, permissions: ["tokens:acquire"], scopes: ["https://graph.microsoft.com/*"])
        func post(_ path: String, _ key: String, _ body: [String: Any]) async throws -> TestResponse {
            try await stack.request("POST", path, json: body, headers: StackHelpers.bearer(key), authenticated: false)
        }
        let app = try await post("/v1/tokens/app", tenantLimited.key, ["scopes": [AppAndOnBehalfOfTests.graphDefault], "correlation_id": "c-1"])
        #expect(app.status == 403, "\(app.text)")
        let management = try await post(
            "/v1/tokens/app", scopeLimited.key, ["scopes": ["https://management.azure.com/.default"], "correlation_id": "c-2"])
        #expect(management.status == 403, "\(management.text)")
        let assertion = try await AppAndOnBehalfOfTests.incomingUserToken(stack)
        let obo = try await post(
            "/v1/tokens/on-behalf-of", scopeLimited.key,
            ["assertion": assertion, "scopes": ["https://management.azure.com/user_impersonation"], "correlation_id": "c-3"])
        #expect(obo.status == 403, "\(obo.text)")
    }

    @Test("An imported account whose refresh token is dead answers interaction_required with a sign_in_url")
    func deadImportCarriesSignInURL() async throws {
        let stack = try await TokenRelayStack(name: "e2e_import_sign_in_url")
        defer { stack.stop() }
        let adalToken = try await stack.adalRefreshToken(for: "bob@contoso.example")
        let imported = try await stack.request(
            "POST", "/v1/accounts/import",
            json: [
                "username": "bob@contoso.example", "refresh_token": adalToken,
                "authority": "\(stack.emulator.baseURL)/\(stack.tenantId)",
            ])
        let id = try #require(imported.json["account_id"] as? String)
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: ["endpoint": "token", "status": 400, "error": "invalid_grant", "error_codes": [700082], "suberror": "bad_token"])
        let dead = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
        #expect(dead.status == 409, "\(dead.text)")
        let link = try #require(dead.json["sign_in_url"] as? String, "\(dead.text)")
        #expect(link.contains("login_hint=bob%40contoso.example"))
        let again = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
        #expect(again.json["sign_in_url"] as? String != nil, "\(again.text)")
    }

    @Test("A key limited to a guest's other tenant sees that account's events, as it sees the account")
    func guestEventsFollowTenantProfiles() async throws {
        let stack = try await TokenRelayStack(name: "e2e_guest_events")
        defer { stack.stop() }
        let fabrikam = StackHelpers.fabrikam
        let home = try await StackHelpers.signIn(
            stack, "erin@contoso.example", authority: "\(stack.emulator.baseURL)/\(stack.tenantId)", scopes: ["User.Read"])
        let id = try #require(home["account_id"] as? String)
        _ = try await StackHelpers.signIn(stack, "erin@contoso.example", authority: "\(stack.emulator.baseURL)/\(fabrikam)", scopes: ["User.Read"])
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: ["endpoint": "token", "status": 400, "error": "invalid_grant", "error_codes": [700082], "suberror": "bad_token"])
        let dead = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(dead.json["account_state"] as? String == "interaction_required", "\(dead.text)")

        let limited = try await StackHelpers.createKey(stack, permissions: ["accounts:read"], tenants: [fabrikam])
        let headers = StackHelpers.bearer(limited.key)
        #expect(try await stack.request("GET", "/v1/accounts/\(id)", headers: headers, authenticated: false).status == 200)
        let page = try await stack.request("GET", "/v1/events", headers: headers, authenticated: false)
        let types = (page.json["events"] as? [[String: Any]] ?? []).filter { $0["account_id"] as? String == id }.compactMap { $0["type"] as? String }
        #expect(types == ["account.interaction_required"], "\(page.text)")
    }

    @Test("A key limited to a guest's other tenant gets no token of the account's home tenant, from memory or the STS")
    func guestTokensStayInTheKeysTenants() async throws {
        let stack = try await TokenRelayStack(name: "e2e_guest_key_realm")
        defer { stack.stop() }
        let fabrikam = StackHelpers.fabrikam
        let home = try await StackHelpers.signIn(
            stack, "erin@contoso.example", authority: "\(stack.emulator.baseURL)/\(stack.tenantId)", scopes: ["User.Read"])
        let id = try #require(home["account_id"] as? String)
        _ = try await StackHelpers.signIn(stack, "erin@contoso.example", authority: "\(stack.emulator.baseURL)/\(fabrikam)", scopes: ["User.Read"])
        // The home tenant's token is in this replica's memory: the server-thread path must refuse it too.
        let warm = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
        #expect(warm.json["source"] as? String == "cache", "\(warm.text)")

        let limited = try await StackHelpers.createKey(stack, permissions: ["tokens:acquire"], tenants: [fabrikam])
        func silent(_ body: [String: Any]) async throws -> TestResponse {
            try await stack.request("POST", "/v1/tokens/silent", json: body, headers: StackHelpers.bearer(limited.key), authenticated: false)
        }
        for scopes in [["User.Read"], ["Mail.Read"]] {
            let implicit = try await silent(["account_id": id, "scopes": scopes])
            #expect(implicit.status == 403, "\(implicit.text)")
            #expect(implicit.json["field"] as? String == "authority")
        }
        let named = try await silent(["account_id": id, "scopes": ["User.Read"], "authority": "\(stack.emulator.baseURL)/\(fabrikam)"])
        #expect(named.status == 200, "\(named.text)")
    }
}
