import Foundation
import Testing
import TokenRelayTesting

/// Bad input found by trying a fresh clone as a new user and then as an attacker; each test
/// failed before its fix.
@Suite("New-user attack findings", .serialized)
struct NewUserAttackTests {
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

    @Test("A body correlation_id that cannot be a header is 400 naming it (a line break was a bare 500, a long one closed the connection)")
    func correlationIdInBody() async throws {
        let stack = try await TokenRelayStack(name: "e2e_nu_correlation")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let bad = ["a\r\nX-Injected: 1", "line\nbreak", String(repeating: "c", count: 5000), "tab\there"]
        for value in bad {
            // The usual body shape (answered on the server thread when cached) and the full parser's.
            for extra in [[:], ["min_ttl_s": 0]] as [[String: Any]] {
                var body: [String: Any] = ["account_id": id, "scopes": ["User.Read"], "correlation_id": value]
                body.merge(extra) { $1 }
                let silent = try await stack.request("POST", "/v1/tokens/silent", json: body)
                #expect(silent.status == 400, "\(value.prefix(20)): \(silent.text)")
                #expect(silent.json["field"] as? String == "correlation_id")
                #expect(silent.headers["Content-Type"]?.hasPrefix("application/problem+json") == true)
            }
            let app = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": ["https://graph.microsoft.com/.default"], "correlation_id": value])
            #expect(app.status == 400, "\(app.text)")
            #expect(app.json["field"] as? String == "correlation_id")
        }
        let fine = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "correlation_id": "my-id-1"])
        #expect(fine.status == 200)
        #expect(fine.headers["client-request-id"] == "my-id-1")
    }

    @Test("An imported username with control characters is 400 (it could never be found by GET /v1/accounts?username=)")
    func importUsernameControlCharacters() async throws {
        let stack = try await TokenRelayStack(name: "e2e_nu_import_username")
        defer { stack.stop() }
        for username in ["a\nb@contoso.example", "x\u{1}@contoso.example", "tab\t@contoso.example"] {
            let imported = try await stack.request(
                "POST", "/v1/accounts/import",
                json: ["username": username, "refresh_token": "adal-era-test-token", "authority": "\(stack.emulator.baseURL)/\(stack.tenantId)"])
            #expect(imported.status == 400, "\(imported.text)")
            #expect(imported.json["field"] as? String == "username")
        }
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

    @Test("A Request-Timeout shorter than the STS's answer never loses the rotated refresh token")
    func shortDeadlineKeepsRotation() async throws {
        // No rotation grace: only the newest refresh token works, so a lost rotation shows.
        let stack = try await TokenRelayStack(name: "e2e_nu_short_deadline", emulatorArguments: ["--rotation-grace-seconds", "0"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let fault = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "latency_ms": 1500, "count": 1])
        #expect(fault.status == 201)
        let refresh: [String: Any] = ["account_id": id, "scopes": ["User.Read"], "force_refresh": true]
        let short = try await stack.request("POST", "/v1/tokens/silent", json: refresh, headers: ["Request-Timeout": "0.3"])
        #expect([503, 504].contains(short.status), "\(short.text)")
        #expect(short.json["error"] as? String == "upstream_unavailable")
        // The redemption the STS answered late was kept: the refresh token it rotated works (this
        // request may join the redemption still in flight; the next one redeems on its own).
        for _ in 0..<2 {
            let next = try await stack.request("POST", "/v1/tokens/silent", json: refresh)
            #expect(next.status == 200, "\(next.text)")
        }
        let chain = try await stack.control("GET", "/_control/stats")
        let alice = ((chain.json["refresh_token_chain"] as? [String: Any])?["alice@contoso.example"] as? [String: Any]) ?? [:]
        #expect(alice["rejected_superseded"] as? Int == 0, "\(chain.text)")
    }
}
