import Foundation
import Testing
import TokenRelayTesting

/// Imported accounts (behaviour §3.6) once their refresh token dies: the answer asks for a sign-in
/// (§4.4), and the import that revives the account is an event.
@Suite("Import: a dead import carries a sign_in_url, a revived account is an event", .serialized)
struct ImportTests {
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
        #expect(try await events(survivor) == ["account.signed_in", "account.interaction_required", "account.recovered", "account.signed_in"])

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
}
