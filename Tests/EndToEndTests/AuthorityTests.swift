import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// The authority a request names or an account stored (behaviour §1.1, §1.2, §1.5): another tenant never
/// gets the home tenant's cached token, another cloud is refused, a home_account_id in two clouds
/// is ambiguous, an authority no longer trusted is interaction_required.
@Suite("Authorities: tenants and clouds keep tokens apart, an ambiguous home account, a stale stored authority", .serialized)
struct AuthorityTests {
    @Test("Another tenant's authority never gets the home tenant's cached token; another cloud is invalid_authority")
    func authorityPartitionsTheCache() async throws {
        let stack = try await TokenRelayStack(name: "e2e_realm")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let home = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
        #expect(home.json["source"] as? String == "cache")
        let otherTenant = try await stack.request(
            "POST", "/v1/tokens/silent",
            json: [
                "account_id": id, "scopes": ["User.Read"], "authority": "\(stack.emulator.baseURL)/22222222-2222-2222-2222-222222222222",
            ])
        #expect(otherTenant.json["source"] as? String != "cache", "\(otherTenant.text)")
        #expect(otherTenant.json["access_token"] as? String != home.json["access_token"] as? String)
        let otherCloud = try await stack.request(
            "POST", "/v1/tokens/silent",
            json: [
                "account_id": id, "scopes": ["User.Read"], "authority": "https://login.microsoftonline.us/22222222-2222-2222-2222-222222222222",
            ])
        #expect(otherCloud.status == 400)
        #expect(otherCloud.json["error"] as? String == "invalid_authority")
    }

    @Test("A home_account_id signed in through two clouds is ambiguous; a no longer trusted stored authority is not a 500")
    func homeAccountAmbiguityAndStaleAuthority() async throws {
        let stack = try await TokenRelayStack(name: "e2e_home")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let home = try #require(try await stack.request("GET", "/v1/accounts/\(id)").json["home_account_id"] as? String)
        try await stack.withDatabase { connection in
            try connection.query(
                """
                INSERT INTO accounts (account_id, client_id, environment, home_account_id, realm, authority, authority_type)
                SELECT 'acc_other_cloud', client_id, 'login.microsoftonline.us', home_account_id, realm,
                       'https://login.microsoftonline.us/' || realm, authority_type FROM accounts WHERE account_id = $1
                """, [.text(id)])
        }
        let ambiguous = try await stack.request("POST", "/v1/tokens/silent", json: ["home_account_id": home, "scopes": ["User.Read"]])
        #expect(ambiguous.status == 409, "\(ambiguous.text)")
        #expect(ambiguous.json["error"] as? String == "ambiguous_account")
        #expect(Set(ambiguous.json["account_ids"] as? [String] ?? []) == [id, "acc_other_cloud"])

        try await stack.withDatabase { connection in
            try connection.query("UPDATE accounts SET authority = 'https://untrusted.example/tenant' WHERE account_id = $1", [.text(id)])
        }
        let stale = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(stale.status == 409, "\(stale.text)")
        #expect(stale.json["error"] as? String == "interaction_required")
    }
}
