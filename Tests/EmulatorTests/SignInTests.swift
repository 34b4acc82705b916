import CryptoBridge
import Foundation
import HTTPCommon
import Testing

@testable import STSEmulator

@Suite("Emulator authorize and authorization_code")
struct SignInTests {
    @Test func authorizeRedirectsWithCodeAndVerbatimState() async throws {
        let h = try EmulatorHarness()
        let (query, _) = try await h.authorize(state: "a b&c=d")
        #expect(query["state"] == "a b&c=d")
        #expect(query["code"] != nil)
        #expect(query["error"] == nil)
    }

    @Test func existingRedirectQueryIsKept() {
        let response = IdentityPlatformEmulator.redirect(to: "https://app.example/cb?x=1", [("code", "c"), ("state", "s t")])
        #expect(response.headers["Location"] == "https://app.example/cb?x=1&code=c&state=s%20t")
    }

    @Test func codeWithRightVerifierGivesTokensAndIDTokenVerifiesWithJWKS() async throws {
        let h = try EmulatorHarness()
        let body = try await h.signIn()
        #expect(body["token_type"] == "Bearer")
        #expect(body["scope"] == "Mail.Read User.Read openid profile email")  // case 13
        #expect(body["expires_in"] == 3600 && body["ext_expires_in"] == 3600)
        #expect(body["refresh_in"] == nil)
        #expect(body["refresh_token"]?.stringValue != nil)
        let jwks = try #require(JSONValue.parse(await h.get("/\(EmulatorHarness.contoso)/discovery/v2.0/keys").body))
        let idClaims = try TestJWT.verify(try #require(body["id_token"]?.stringValue), jwks: jwks)
        #expect(idClaims["nonce"] == "n-0S6_WzA2Mj")
        #expect(idClaims["aud"]?.stringValue == EmulatorHarness.clientID)
        #expect(idClaims["iss"]?.stringValue == "\(EmulatorHarness.base)/\(EmulatorHarness.contoso)/v2.0")
        #expect(idClaims["tid"]?.stringValue == EmulatorHarness.contoso)
        #expect(idClaims["oid"] == "aaaaaaaa-0000-4000-8000-00000000a11c")
        #expect(idClaims["preferred_username"] == "alice@contoso.example")
        #expect(idClaims["name"] == "Alice Example")
        #expect(idClaims["ver"] == "2.0")
        #expect(idClaims["exp"]?.intValue == 1_800_003_600)
        let accessClaims = try TestJWT.verify(try #require(body["access_token"]?.stringValue), jwks: jwks)
        #expect(accessClaims["aud"] == "00000003-0000-0000-c000-000000000000")
        #expect(accessClaims["scp"] == "Mail.Read User.Read openid profile email")
        #expect(accessClaims["tid"]?.stringValue == EmulatorHarness.contoso)
    }

    @Test func clientInfoDecodesToUidAndUtid() async throws {
        let h = try EmulatorHarness()
        let body = try await h.signIn("carol@fabrikam.example", tenant: "organizations")
        let infoText = try #require(body["client_info"]?.stringValue)
        let info = try #require(Base64URL.decode(infoText).flatMap { JSONValue.parse($0) })
        #expect(info == ["uid": "cccccccc-0000-4000-8000-0000000ca501", "utid": .string(EmulatorHarness.fabrikam)])
    }

    @Test func b2cClientInfoUidCarriesLowerCasedPolicy() async throws {
        let h = try EmulatorHarness()
        let (query, verifier) = try await h.authorize(
            tenant: "contosob2c.onmicrosoft.com", loginHint: "dave@b2c.example", scope: "https://contosob2c.onmicrosoft.com/api/read openid offline_access",
            policy: "B2C_1_SignIn")
        let response = await h.postForm(
            "/contosob2c.onmicrosoft.com/B2C_1_SignIn/oauth2/v2.0/token",
            [
                ("client_id", EmulatorHarness.clientID), ("client_secret", EmulatorHarness.secret), ("grant_type", "authorization_code"),
                ("code", query["code"] ?? ""), ("redirect_uri", EmulatorHarness.redirectURI), ("code_verifier", verifier),
                ("client_info", "1"),
            ])
        #expect(response.status == 200)
        let body = try #require(JSONValue.parse(response.body))
        let info = try #require(Base64URL.decode(body["client_info"]?.stringValue ?? "").flatMap { JSONValue.parse($0) })
        #expect(info["uid"] == "dddddddd-0000-4000-8000-00000000da7e-b2c_1_signin")
        #expect(body["scope"] == "https://contosob2c.onmicrosoft.com/api/read openid profile email")
    }

    @Test func wrongVerifierIs501481AndCodeIsSingleUse() async throws {
        let h = try EmulatorHarness()
        let (query, verifier) = try await h.authorize()
        let code = try #require(query["code"])
        func redeem(_ v: String) async -> HTTPResponse {
            await h.token([
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", EmulatorHarness.redirectURI), ("code_verifier", v),
                ("scope", "User.Read offline_access openid"),
            ])
        }
        try expectEntraErrorShape(await redeem(verifier + "x"), status: 400, error: "invalid_grant", code: 501481)
        #expect(await redeem(verifier).status == 200)
        try expectEntraErrorShape(await redeem(verifier), status: 400, error: "invalid_grant", code: 54005)
    }

    @Test func codeExpiresAfterTenMinutes() async throws {
        let h = try EmulatorHarness()
        let (query, verifier) = try await h.authorize()
        h.clock.advance(by: 601)
        let response = await h.token([
            ("grant_type", "authorization_code"), ("code", query["code"] ?? ""), ("redirect_uri", EmulatorHarness.redirectURI),
            ("code_verifier", verifier),
        ])
        try expectEntraErrorShape(response, status: 400, error: "invalid_grant", code: 70008)
    }

    @Test func pkceIsRequiredAndErrorsGoToTheRedirectURI() async throws {
        let h = try EmulatorHarness()
        let response = await h.get(
            "/common/oauth2/v2.0/authorize",
            query: [
                ("client_id", EmulatorHarness.clientID), ("response_type", "code"), ("redirect_uri", EmulatorHarness.redirectURI),
                ("scope", "openid"), ("state", "xyz"),
            ])
        #expect(response.status == 302)
        let query = URLComponents(string: response.headers["Location"] ?? "")?.queryItems ?? []
        #expect(query.first { $0.name == "error" }?.value == "invalid_request")
        #expect(query.first { $0.name == "state" }?.value == "xyz")
    }

    @Test func declinedConsentRedirectsAccessDenied65004() async throws {
        let h = try EmulatorHarness()
        #expect(await h.control("users/bob@contoso.example", ["decline_consent": true]).status == 200)
        let (query, _) = try await h.authorize(loginHint: "BOB@contoso.example")
        #expect(query["error"] == "access_denied")
        #expect(query["error_description"]?.hasPrefix("AADSTS65004: User declined to consent") == true)
        #expect(query["state"] == "st&=1")
        #expect(query["code"] == nil)
    }

    @Test func unknownLoginHintIsLoginRequired() async throws {
        let h = try EmulatorHarness()
        let (query, _) = try await h.authorize(loginHint: "nobody@contoso.example")
        #expect(query["error"] == "login_required")
        #expect(query["error_description"]?.hasPrefix("AADSTS50034:") == true)
    }

    @Test func noLoginHintSignsInTheTenantsFirstUser() async throws {
        let h = try EmulatorHarness()
        let (query, verifier) = try await h.authorize(tenant: EmulatorHarness.fabrikam, loginHint: nil)
        let response = await h.token(
            tenant: EmulatorHarness.fabrikam,
            [("grant_type", "authorization_code"), ("code", query["code"] ?? ""), ("redirect_uri", EmulatorHarness.redirectURI), ("code_verifier", verifier)])
        let body = try #require(JSONValue.parse(response.body))
        let claims = try TestJWT.parts(try #require(body["id_token"]?.stringValue)).claims
        #expect(claims["preferred_username"] == "carol@fabrikam.example")
    }
}
