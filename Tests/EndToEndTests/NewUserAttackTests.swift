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
        let limited = try APIKeyAccessTests.createKey(
            stack, permissions: ["accounts:write", "accounts:read"], tenants: [otherTenant], scopes: ["User.Read"])
        func importing(_ extra: [String: String]) async throws -> TestResponse {
            var body = ["username": "planted@contoso.example", "refresh_token": "adal-era-test-token"]
            body.merge(extra) { $1 }
            return try await stack.request("POST", "/v1/accounts/import", json: body, headers: APIKeyAccessTests.bearer(limited.key), authenticated: false)
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
}
