import Foundation
import Testing
import TokenRelayTesting

/// A key's tenant and scope limits (behaviour §7.1, §12 Permissions) on the built binaries: what
/// a limited key may import, which tokens it gets (also with a body correlation_id, and for a
/// guest's other tenant) and which events it sees; the CLI never makes an empty limit unrestricted.
@Suite("API-key limits hold on every route: imports, app and on-behalf-of tokens, a guest's tenants, the CLI", .serialized)
struct APIKeyLimitsEndToEndTests {
    @Test("A tenant- and scope-limited key may not import an account into another tenant or for a resource outside its patterns")
    func importHonoursKeyLimits() async throws {
        let stack = try await TokenRelayStack(name: "e2e_nu_import_limits")
        defer { stack.stop() }
        let otherTenant = "22222222-2222-2222-2222-222222222222"
        let limited = try await StackHelpers.createKey(
            stack, permissions: ["accounts:write", "accounts:read"], tenants: [otherTenant], scopes: ["User.Read"])
        func importing(_ extra: [String: String]) async throws -> TestResponse {
            var body = ["username": "planted@contoso.example", "refresh_token": "adal-era-test-token"]
            body.merge(extra) { $1 }
            return try await stack.request("POST", "/v1/accounts/import", json: body, headers: StackHelpers.bearer(limited.key), authenticated: false)
        }
        let home = try await importing(["authority": "\(stack.emulator.baseURL)/\(stack.tenantId)"])
        #expect(home.status == 403, "\(home.text)")
        #expect(home.json["field"] as? String == "authority")
        let resource = try await importing(["authority": "\(stack.emulator.baseURL)/\(otherTenant)", "resource": "https://vault.azure.net"])
        #expect(resource.status == 403, "\(resource.text)")
        #expect(resource.json["field"] as? String == "resource")
        // Nothing was planted: the unrestricted key finds no such account.
        let listed = try await stack.request("GET", "/v1/accounts?username=planted@contoso.example")
        #expect((listed.json["accounts"] as? [Any])?.isEmpty == true, "\(listed.text)")
        // Inside its limits the key still imports.
        let allowed = try await importing(["authority": "\(stack.emulator.baseURL)/\(otherTenant)"])
        #expect(allowed.status == 201, "\(allowed.text)")
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
        #expect(types == ["account.signed_in", "account.signed_in", "account.interaction_required"], "\(page.text)")
    }

    @Test("api-keys create with an empty --tenants or --scopes refuses instead of creating an unrestricted key")
    func emptyKeyLimits() async throws {
        let stack = try await TokenRelayStack(name: "e2e_nu_empty_limits")
        defer { stack.stop() }
        let environment = StackHelpers.cliEnvironment(stack)
        for limit in [["--tenants", ""], ["--scopes", " , "], ["--tenants"]] {
            let (status, output) = try await CommandLineTests.run(
                ["api-keys", "create", "--name", "limited", "--permissions", "tokens:acquire"] + limit, environment: environment)
            #expect(status == 2, "\(limit): \(output)")
            #expect(!output.contains("trk_"))
        }
        let (status, _) = try await CommandLineTests.run(
            ["api-keys", "create", "--name", "limited", "--permissions", "tokens:acquire", "--tenants", stack.tenantId], environment: environment)
        #expect(status == 0)
    }

    /// `--tenants notauuid` made a key that could see no account (found by the new-user try); a
    /// repeated option kept its first value and dropped the second without a word.
    @Test("api-keys create refuses a tenant that is no GUID or domain, a bad name or scope pattern, and an option given twice, naming the option")
    func keyOptionsAreChecked() async throws {
        let stack = try await TokenRelayStack(name: "e2e_nu_key_options")
        defer { stack.stop() }
        let environment = StackHelpers.cliEnvironment(stack)
        let create = ["api-keys", "create", "--name", "limited", "--permissions", "tokens:acquire"]
        for (extra, named) in [
            (["--tenants", "notauuid"], "--tenants"), (["--tenants", "\(stack.tenantId),common"], "--tenants"),
            (["--tenants", "contoso.onmicrosoft.com", "--tenants", stack.tenantId], "--tenants"), (["--scopes", "User.Read Mail.Read"], "--scopes"),
            (["--permissions", "accounts:read"], "--permissions"),
        ] {
            let run = try await BuiltProducts.run("token-relay", create + extra, environment: environment)
            #expect(run.status == 2, "\(extra): \(run.output)\(run.error)")
            #expect(run.error.contains(named), "\(extra): \(run.error)")
            #expect(!run.output.contains("trk_") && !run.error.contains("trk_"))
        }
        let badName = try await BuiltProducts.run(
            "token-relay", ["api-keys", "create", "--name", "a\u{1}b", "--permissions", "tokens:acquire"], environment: environment)
        #expect(badName.status == 2 && badName.error.contains("--name"), "\(badName.error)")
        let blankName = try await BuiltProducts.run(
            "token-relay", ["api-keys", "create", "--name", "   ", "--permissions", "tokens:acquire"], environment: environment)
        #expect(blankName.status == 2 && blankName.error.contains("--name"), "\(blankName.error)")
        let badFilter = try await BuiltProducts.run("token-relay", ["accounts", "list", "--tenant-id", "notauuid"], environment: environment)
        #expect(badFilter.status == 2 && badFilter.error.contains("--tenant-id"), "\(badFilter.error)")
        // An option whose value is missing took the next option as its value: `--name $UNSET
        // --permissions admin` made an admin key named `--permissions` (found by a new-user try).
        for arguments in [
            ["api-keys", "create", "--name", "--permissions", "admin"], ["api-keys", "create", "--permissions", "admin", "--name"],
            ["api-keys", "create", "--name", "n", "--scopes", "--permissions", "admin"],
        ] {
            let run = try await BuiltProducts.run("token-relay", arguments, environment: environment)
            #expect(run.status == 2, "\(arguments): \(run.output)\(run.error)")
            #expect(run.error.contains("needs a value"), "\(arguments): \(run.error)")
            #expect(!run.output.contains("trk_"), "\(arguments) made a key")
        }
        // `revoke` takes a key id only: what is none is refused before it is printed or audited.
        let revoke = try await BuiltProducts.run("token-relay", ["api-keys", "revoke", #"a"b\"#], environment: environment)
        #expect(revoke.status == 2 && revoke.output.isEmpty && revoke.error.contains("KEY_ID"), "\(revoke.output)\(revoke.error)")
        // A tenant id in any case and a verified domain name are tenants.
        let good = try await BuiltProducts.run(
            "token-relay", create + ["--tenants", "\(stack.tenantId.uppercased()),contoso.onmicrosoft.com"], environment: environment)
        #expect(good.status == 0 && good.output.contains("trk_"), "\(good.error)")
    }

    /// A user revoking a leaked key pasted the whole key: it was printed, written to the audit
    /// trail (kept 365 days, exported) and nothing was revoked (found by the new-user try).
    @Test("api-keys revoke given a whole key names its id and neither prints nor audits the secret; an unknown id says so")
    func revokeTakesAKeyIdNeverAKey() async throws {
        let stack = try await TokenRelayStack(name: "e2e_nu_revoke_whole_key")
        defer { stack.stop() }
        let environment = StackHelpers.cliEnvironment(stack)
        let created = try await BuiltProducts.run(
            "token-relay", ["api-keys", "create", "--name", "leaked", "--permissions", "tokens:acquire"], environment: environment)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(created.output.utf8)) as? [String: Any])
        let key = try #require(object["api_key"] as? String)
        let keyId = try #require(object["key_id"] as? String)
        let secret = String(key.dropFirst("trk_\(keyId)_".count))

        let whole = try await BuiltProducts.run("token-relay", ["api-keys", "revoke", key], environment: environment)
        #expect(whole.status == 2, "exit \(whole.status)")  // its output may hold the secret: not quoted
        #expect(whole.error.contains("api-keys revoke \(keyId)"), "\(whole.error)")
        #expect(!whole.output.contains(secret) && !whole.error.contains(secret))
        for id in [String(repeating: "a", count: 65), "'; drop table api_keys;--", "ABC"] {
            let refused = try await BuiltProducts.run("token-relay", ["api-keys", "revoke", id], environment: environment)
            #expect(refused.status == 2 && refused.output.isEmpty, "\(id): \(refused.output)\(refused.error)")
        }
        let audited = try await stack.withDatabase { connection in
            try connection.query("SELECT detail::text AS d FROM audit_events WHERE action = 'api_key.revoked'").rows.compactMap { $0.string("d") }
        }
        #expect(audited.isEmpty, "\(audited.count) revocations audited")

        let byId = try await BuiltProducts.run("token-relay", ["api-keys", "revoke", keyId], environment: environment)
        #expect(byId.status == 0, "\(byId.error)")
        let again = try await BuiltProducts.run("token-relay", ["api-keys", "revoke", keyId], environment: environment)
        #expect(again.status == 1 && again.error.contains("no key '\(keyId)'"), "\(again.error)")
        let refusedKey = try await stack.request("GET", "/v1/accounts", headers: ["Authorization": "Bearer \(key)"], authenticated: false)
        #expect(refusedKey.status == 401)
    }
}
