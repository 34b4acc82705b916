import Foundation
import Testing
import TokenRelayTesting

/// Bad input is refused at the edge, naming its field, before any STS call and never as a 500
/// (behaviour §4.5, §7.4): NUL in a body, a query or a path, control characters in an imported
/// username, a thousand scopes.
@Suite("Input validation: NUL and control characters, too many scopes", .serialized)
struct InputValidationTests {
    @Test("NUL characters in input are 400 naming the field, never 500")
    func nulCharacters() async throws {
        let stack = try await TokenRelayStack(name: "e2e_nul")
        defer { stack.stop() }
        let body = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": "acc\u{0}x", "scopes": ["User.Read"]])
        #expect(body.status == 400, "\(body.text)")
        let query = try await stack.request("GET", "/v1/accounts?username=%00")
        #expect(query.status == 400)
        #expect(query.json["field"] as? String == "username")
        let unknownParameter = try await stack.request("GET", "/v1/accounts?bogus=1")
        #expect(unknownParameter.status == 400)
        #expect(unknownParameter.json["field"] as? String == "bogus")
        let longHint = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": String(repeating: "a", count: 300)])
        #expect(longHint.status == 400)
        #expect(longHint.json["field"] as? String == "login_hint")
    }

    @Test("%00 in a path does not cut it short: no account or Graph resource is reached through it")
    func percentZeroInPaths() async throws {
        let stack = try await TokenRelayStack(name: "e2e_percent_zero")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        #expect(try await stack.request("GET", "/v1/accounts/\(id)").status == 200)
        let truncated = try await stack.request("GET", "/v1/accounts/\(id)%00garbage")
        #expect(truncated.status == 404, "\(truncated.text)")
        let me = try await stack.request("GET", "/v1/downstream/graph/me%00x", headers: ["X-Account-Id": id])
        #expect(me.json["userPrincipalName"] == nil, "the relay called /me: \(me.status) \(me.text)")
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

    @Test("A thousand scopes is 400 invalid_scope before any STS call (it used to redeem, fail to cache and lose the rotation)")
    func tooManyScopes() async throws {
        let stack = try await TokenRelayStack(name: "e2e_many_scopes")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let before = try await stack.emulatorCount("token_requests")
        let refused = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": (0..<1000).map { "S\($0)" }])
        #expect(refused.status == 400)
        #expect(refused.json["error"] as? String == "invalid_scope")
        #expect(refused.json["field"] as? String == "scopes")
        #expect(try await stack.emulatorCount("token_requests") == before)
        let signIn = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": (0..<1000).map { "S\($0)" }])
        #expect(signIn.status == 400)
    }
}
