import CryptoBridge
import Foundation
import HTTPCommon
import Testing

@testable import STSEmulator

@Suite("Emulator refresh_token grant")
struct RefreshTokenTests {
    @Test func rotationGivesANewTokenEachTimeAndTheOldOneDiesAfterTheGrace() async throws {
        let h = try EmulatorHarness(rotationGrace: 2)
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        let first = await h.refresh(a)
        #expect(first.status == 200)
        let b = try #require(JSONValue.parse(first.body)?["refresh_token"]?.stringValue)
        #expect(b != a)

        // Within the grace the superseded token still works and hands out the chain's newest.
        h.clock.advance(by: 1.5)
        let reuse = await h.refresh(a)
        #expect(reuse.status == 200)
        #expect(JSONValue.parse(reuse.body)?["refresh_token"]?.stringValue == b)

        let second = await h.refresh(b)
        let c = try #require(JSONValue.parse(second.body)?["refresh_token"]?.stringValue)
        #expect(c != b && c != a)

        h.clock.advance(by: 1)  // a: 2.5 s after it was superseded
        try expectEntraErrorShape(await h.refresh(a), status: 400, error: "invalid_grant", code: 70000)
        #expect(await h.refresh(b).status == 200)  // b superseded 1 s ago: still in grace
        h.clock.advance(by: 5)
        try expectEntraErrorShape(await h.refresh(b), status: 400, error: "invalid_grant", code: 70000)

        let stats = try #require(JSONValue.parse(await h.get("/_control/stats").body))
        let chain = try #require(stats["refresh_token_chain"]?["alice@contoso.example"])
        #expect(chain["rejected_superseded"] == 2)
        #expect(chain["reused_within_grace"] == 2)
    }

    @Test func unknownRefreshTokenIsInvalidGrant() async throws {
        let h = try EmulatorHarness()
        try expectEntraErrorShape(await h.refresh("1.AXkA-not-issued"), status: 400, error: "invalid_grant", code: 9002313)
    }

    @Test("A refresh token redeemed at a tenant that did not issue it is 400 invalid_grant AADSTS7000012 and stays good at its own")
    func anotherTenantsAuthorityIs7000012() async throws {
        // cases/33-aadsts7000012-refresh-token-for-a-different-tenant
        let h = try EmulatorHarness()
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        let refused = await h.refresh(a, tenant: EmulatorHarness.fabrikam)
        try expectEntraErrorShape(refused, status: 400, error: "invalid_grant", code: 7000012, errorURI: false)
        let description = JSONValue.parse(refused.body)?["error_description"]?.stringValue ?? ""
        #expect(description.hasPrefix("AADSTS7000012: The grant was obtained for a different tenant. Trace ID: "))
        #expect(await h.refresh(a).status == 200)
    }

    @Test func wrongClientSecretIsCase09Shape() async throws {
        // cases/09-aadsts7000215-invalid-client-secret-401
        let h = try EmulatorHarness()
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        let response = await h.token(
            [("grant_type", "refresh_token"), ("refresh_token", a), ("scope", "https://graph.microsoft.com/User.Read offline_access")],
            secret: "the-secret-id")
        try expectEntraErrorShape(response, status: 401, error: "invalid_client", code: 7000215)
        let description = JSONValue.parse(response.body)?["error_description"]?.stringValue ?? ""
        #expect(description.contains("for a secret added to app '\(EmulatorHarness.clientID)'.\r\nTrace ID: "))
        #expect(await h.refresh(a).status == 200)  // the rejected request consumed nothing
    }

    @Test func httpBasicClientAuthentication() async throws {
        let h = try EmulatorHarness()
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        let basic = Data("\(EmulatorHarness.clientID):\(EmulatorHarness.secret)".utf8).base64EncodedString()
        let response = await h.postForm(
            "/common/oauth2/v2.0/token",
            [("grant_type", "refresh_token"), ("refresh_token", a), ("scope", "User.Read offline_access")],
            headers: ["Authorization": "Basic \(basic)"])
        #expect(response.status == 200)
    }

    @Test func revokedRefreshTokensAre50173WithoutSuberror() async throws {
        // cases/05-aadsts50173-grant-revoked-password-change
        let h = try EmulatorHarness()
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        #expect(await h.control("users/alice@contoso.example", ["revoke_refresh_tokens": true]).status == 200)
        let response = await h.refresh(a)
        try expectEntraErrorShape(response, status: 400, error: "invalid_grant", code: 50173)
        #expect(JSONValue.parse(response.body)?["error_description"]?.stringValue?.contains("TokensValidFrom") == true)
        // A new sign-in gives a working token again.
        let fresh = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        #expect(await h.refresh(fresh).status == 200)
    }

    @Test func omitRefreshTokenKeepsTheOldOneValid() async throws {
        // cases/14-token-response-without-refresh-token
        let h = try EmulatorHarness()
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        _ = await h.control("users/alice@contoso.example", ["omit_refresh_token": true])
        let response = await h.refresh(a)
        let body = try #require(JSONValue.parse(response.body))
        #expect(response.status == 200)
        #expect(body["refresh_token"] == nil)
        #expect(body["access_token"] != nil)
        #expect(await h.refresh(a).status == 200)
    }

    @Test func noOfflineAccessMeansNoRefreshToken() async throws {
        let h = try EmulatorHarness()
        let body = try await h.signIn(scope: "User.Read openid profile")
        #expect(body["refresh_token"] == nil)
    }

    @Test func declinedScopesNarrowTheScopeField() async throws {
        // cases/16-declined-scopes-narrower-grant
        let h = try EmulatorHarness()
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        _ = await h.control("users/alice@contoso.example", ["declined_scopes": ["https://graph.microsoft.com/User.ReadBasic.All"]])
        let response = await h.refresh(
            a, scope: "https://graph.microsoft.com/User.ReadBasic.All https://graph.microsoft.com/Files.ReadWrite offline_access openid profile")
        #expect(JSONValue.parse(response.body)?["scope"] == "Files.ReadWrite openid profile email")
    }

    @Test func lifetimesFromControls() async throws {
        let h = try EmulatorHarness()
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        _ = await h.control("users/alice@contoso.example", ["expires_in": 4213, "ext_expires_in": 8426, "refresh_in": 2106])
        let body = try #require(JSONValue.parse(await h.refresh(a).body))
        #expect(body["expires_in"] == 4213 && body["ext_expires_in"] == 8426 && body["refresh_in"] == 2106)
        let claims = try TestJWT.parts(try #require(body["access_token"]?.stringValue)).claims
        #expect(claims["exp"]?.intValue == 1_800_000_000 + 4213)
    }

    @Test func consentRequiredIsCase06ShapeUntilAnAuthorizeAsksForIt() async throws {
        // cases/06-aadsts65001-consent-required
        let h = try EmulatorHarness()
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        _ = await h.control("users/alice@contoso.example", ["consent_required_scopes": ["Calendars.ReadWrite"]])
        let response = await h.refresh(a, scope: "https://graph.microsoft.com/Calendars.ReadWrite offline_access")
        try expectEntraErrorShape(response, status: 400, error: "invalid_grant", code: 65001, suberror: "consent_required", errorURI: false)
        #expect(await h.refresh(a, scope: "https://graph.microsoft.com/Mail.Read offline_access").status == 200)
        _ = try await h.signIn(scope: "https://graph.microsoft.com/Calendars.ReadWrite offline_access")
        #expect(await h.refresh(a, scope: "https://graph.microsoft.com/Calendars.ReadWrite offline_access").status == 200)
    }

    @Test func scopesOfTwoResourcesAre28000() async throws {
        let h = try EmulatorHarness()
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        try expectEntraErrorShape(
            await h.refresh(a, scope: "User.Read https://management.azure.com/user_impersonation"), status: 400, error: "invalid_scope", code: 28000)
    }

    @Test func clientRequestIDIsEchoedWhenAsked() async throws {
        let h = try EmulatorHarness()
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        let id = "5c5c5c5c-0000-4000-8000-000000000001"
        let response = await h.token(
            [("grant_type", "refresh_token"), ("refresh_token", a), ("scope", "User.Read")],
            headers: ["client-request-id": id, "return-client-request-id": "true"])
        #expect(response.headers["client-request-id"] == id)
        let failed = await h.token([("grant_type", "refresh_token"), ("refresh_token", "nope"), ("scope", "User.Read")], headers: ["client-request-id": id])
        #expect(JSONValue.parse(failed.body)?["correlation_id"]?.stringValue == id)
    }

    @Test func b2cErrorsCarryOnlyErrorAndDescription() async throws {
        // cases/08-aadb2c90080-b2c-expired-grant (shape)
        let h = try EmulatorHarness()
        let response = await h.postForm(
            "/contosob2c.onmicrosoft.com/B2C_1_signin/oauth2/v2.0/token",
            [
                ("client_id", EmulatorHarness.clientID), ("client_secret", EmulatorHarness.secret), ("grant_type", "refresh_token"),
                ("refresh_token", "unknown"), ("scope", "https://contosob2c.onmicrosoft.com/api/read offline_access openid"),
            ])
        #expect(response.status == 400)
        let body = try #require(JSONValue.parse(response.body))
        guard case .object(let members) = body else { throw CancellationError() }
        #expect(members.map(\.0) == ["error", "error_description"])
        let description = body["error_description"]?.stringValue ?? ""
        #expect(description.wholeMatch(of: /AADB2C\d{5}: .+\r\nCorrelation ID: \S+\r\nTimestamp: \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ/) != nil)
    }

    @Test func clientCredentialsGivesAnAppTokenWithRoles() async throws {
        let h = try EmulatorHarness()
        let response = await h.token([("grant_type", "client_credentials"), ("scope", "https://graph.microsoft.com/.default")])
        #expect(response.status == 200)
        let body = try #require(JSONValue.parse(response.body))
        #expect(body["refresh_token"] == nil && body["scope"] == nil)
        let claims = try TestJWT.parts(try #require(body["access_token"]?.stringValue)).claims
        #expect(claims["roles"] == ["User.Read.All"])
        #expect(claims["idtyp"] == "app")
        let bad = await h.token([("grant_type", "client_credentials"), ("scope", "User.Read")])
        try expectEntraErrorShape(bad, status: 400, error: "invalid_scope", code: 1002012)
    }

    @Test func onBehalfOfNeedsATokenForThisClient() async throws {
        let h = try EmulatorHarness()
        let incoming = try await h.signIn(scope: "api://\(EmulatorHarness.clientID)/access_as_user openid")
        let assertion = try #require(incoming["access_token"]?.stringValue)
        let obo = await h.token([
            ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", assertion), ("requested_token_use", "on_behalf_of"),
            ("scope", "https://graph.microsoft.com/User.Read"),
        ])
        #expect(obo.status == 200)
        let graphToken = try #require(JSONValue.parse(obo.body)?["access_token"]?.stringValue)
        let claims = try TestJWT.parts(graphToken).claims
        #expect(claims["oid"] == "aaaaaaaa-0000-4000-8000-00000000a11c")
        // A Graph token is not an assertion for this client.
        let wrong = await h.token([
            ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", graphToken), ("requested_token_use", "on_behalf_of"),
            ("scope", "https://graph.microsoft.com/User.Read"),
        ])
        try expectEntraErrorShape(wrong, status: 400, error: "invalid_grant", code: 50013)
    }
}
