import HTTPCommon
import Testing

@testable import STSEmulator

@Suite("Emulator discovery and keys")
struct DiscoveryTests {
    @Test func openIDConfigurationOfATenant() async throws {
        let h = try EmulatorHarness()
        let response = await h.get("/\(EmulatorHarness.contoso)/v2.0/.well-known/openid-configuration")
        #expect(response.status == 200)
        let doc = try #require(JSONValue.parse(response.body))
        let root = "\(EmulatorHarness.base)/\(EmulatorHarness.contoso)"
        #expect(doc["issuer"]?.stringValue == "\(root)/v2.0")
        #expect(doc["authorization_endpoint"]?.stringValue == "\(root)/oauth2/v2.0/authorize")
        #expect(doc["token_endpoint"]?.stringValue == "\(root)/oauth2/v2.0/token")
        #expect(doc["jwks_uri"]?.stringValue == "\(root)/discovery/v2.0/keys")
        #expect(doc["id_token_signing_alg_values_supported"] == ["RS256"])
        #expect(doc["response_types_supported"]?.arrayValue?.contains("code") == true)
    }

    @Test func multiTenantIssuerHoldsThePlaceholder() async throws {
        let h = try EmulatorHarness()
        for tenant in ["common", "organizations", "consumers"] {
            let doc = try #require(JSONValue.parse(await h.get("/\(tenant)/v2.0/.well-known/openid-configuration").body))
            #expect(doc["issuer"]?.stringValue == "\(EmulatorHarness.base)/{tenantid}/v2.0")
            #expect(doc["jwks_uri"]?.stringValue == "\(EmulatorHarness.base)/\(tenant)/discovery/v2.0/keys")
        }
    }

    @Test func tenantDomainAndB2CPolicyPaths() async throws {
        let h = try EmulatorHarness()
        let byDomain = try #require(JSONValue.parse(await h.get("/contoso.example/v2.0/.well-known/openid-configuration").body))
        #expect(byDomain["issuer"]?.stringValue == "\(EmulatorHarness.base)/\(EmulatorHarness.contoso)/v2.0")
        let b2c = await h.get("/tfp/contosob2c.onmicrosoft.com/B2C_1_signin/v2.0/.well-known/openid-configuration")
        let doc = try #require(JSONValue.parse(b2c.body))
        #expect(doc["issuer"]?.stringValue == "\(EmulatorHarness.base)/\(EmulatorHarness.b2cTenant)/v2.0/")
        #expect(doc["token_endpoint"]?.stringValue == "\(EmulatorHarness.base)/contosob2c.onmicrosoft.com/B2C_1_signin/oauth2/v2.0/token")
    }

    @Test func unknownTenantIs90002() async throws {
        let h = try EmulatorHarness()
        let response = await h.get("/not-a-tenant.example/v2.0/.well-known/openid-configuration")
        try expectEntraErrorShape(response, status: 400, error: "invalid_tenant", code: 90002)
    }

    @Test func jwksHasOneRS256Key() async throws {
        let h = try EmulatorHarness()
        let response = await h.get("/common/discovery/v2.0/keys")
        #expect(response.status == 200)
        let jwks = try #require(JSONValue.parse(response.body))
        let keys = try #require(jwks["keys"]?.arrayValue)
        #expect(keys.count == 1)
        let key = try #require(keys.first)
        #expect(key["kty"] == "RSA" && key["use"] == "sig" && key["alg"] == "RS256")
        #expect(key["e"] == "AQAB")
        #expect((key["kid"]?.stringValue?.count ?? 0) > 10)
        #expect((key["n"]?.stringValue?.count ?? 0) == 342)  // 256 bytes, base64url without padding
    }
}
