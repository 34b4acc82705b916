import CryptoBridge
import Foundation
import HTTPCommon
import Testing

@testable import STSEmulator

/// Guests (one home identity, tokens per tenant), ADAL-era refresh tokens for import tests, and
/// the lenient-wire controls (numbers as digit strings, `foci`).
@Suite("Emulator: guests, ADAL refresh tokens, wire controls")
struct GuestAndImportTests {
    static let scope = "https://graph.microsoft.com/User.Read openid profile offline_access"

    static func clientInfo(_ body: JSONValue) throws -> JSONValue {
        let text = try #require(body["client_info"]?.stringValue)
        return try #require(Base64URL.decode(text).flatMap { JSONValue.parse($0) })
    }

    @Test func aGuestGetsTheOtherTenantsTidAndOidButItsHomeClientInfo() async throws {
        let harness = try EmulatorHarness()
        let home = try await harness.signIn("erin@contoso.example", tenant: EmulatorHarness.contoso, scope: Self.scope)
        let guest = try await harness.signIn("erin@contoso.example", tenant: EmulatorHarness.fabrikam, scope: Self.scope)
        let homeClaims = try TestJWT.parts(try #require(home["id_token"]?.stringValue)).claims
        let guestClaims = try TestJWT.parts(try #require(guest["id_token"]?.stringValue)).claims
        #expect(homeClaims["tid"]?.stringValue == EmulatorHarness.contoso)
        #expect(guestClaims["tid"]?.stringValue == EmulatorHarness.fabrikam)
        #expect(guestClaims["oid"]?.stringValue == "eeeeeeee-0000-4000-8000-0000000f0e57")
        #expect(guestClaims["iss"]?.stringValue == "\(EmulatorHarness.base)/\(EmulatorHarness.fabrikam)/v2.0")
        #expect(guestClaims["preferred_username"]?.stringValue == "erin@contoso.example")
        #expect(try Self.clientInfo(guest) == Self.clientInfo(home))
        #expect(try Self.clientInfo(guest)["utid"]?.stringValue == EmulatorHarness.contoso)

        // One refresh token redeems in both tenants; a tenant the user is not in refuses it.
        let refreshToken = try #require(home["refresh_token"]?.stringValue)
        let inGuest = await harness.refresh(refreshToken, tenant: EmulatorHarness.fabrikam)
        #expect(inGuest.status == 200)
        let body = try #require(JSONValue.parse(inGuest.body))
        let access = try TestJWT.parts(try #require(body["access_token"]?.stringValue)).claims
        #expect(access["tid"]?.stringValue == EmulatorHarness.fabrikam)
        let carol = try await harness.signIn("carol@fabrikam.example", tenant: EmulatorHarness.fabrikam, scope: Self.scope)
        let outsider = await harness.refresh(try #require(carol["refresh_token"]?.stringValue), tenant: EmulatorHarness.contoso)
        #expect(outsider.status == 400)
    }

    @Test func aUserWhoIsNotAGuestCannotSignIntoAnotherTenant() async throws {
        let harness = try EmulatorHarness()
        let response = await harness.get(
            "/\(EmulatorHarness.fabrikam)/oauth2/v2.0/authorize",
            query: [
                ("client_id", EmulatorHarness.clientID), ("response_type", "code"), ("redirect_uri", EmulatorHarness.redirectURI),
                ("scope", Self.scope), ("code_challenge", "x"), ("code_challenge_method", "S256"), ("login_hint", "alice@contoso.example"),
            ])
        #expect(response.headers["Location"]?.contains("error=login_required") == true)
    }

    @Test func anADALRefreshTokenRedeemsLikeAnyOther() async throws {
        let harness = try EmulatorHarness()
        let minted = await harness.control("users/bob@contoso.example/adal-refresh-token", [:])
        #expect(minted.status == 201)
        let token = try #require(JSONValue.parse(minted.body)?["refresh_token"]?.stringValue)
        let redeemed = await harness.refresh(token, tenant: "organizations")
        #expect(redeemed.status == 200)
        let body = try #require(JSONValue.parse(redeemed.body))
        #expect(try Self.clientInfo(body)["uid"]?.stringValue == "bbbbbbbb-0000-4000-8000-000000000b0b")
        #expect(body["id_token"] != nil)
        #expect(await harness.control("users/nobody@contoso.example/adal-refresh-token", [:]).status == 404)
    }

    @Test func numbersAsStringsAndFociFollowTheControls() async throws {
        let harness = try EmulatorHarness()
        _ = await harness.control("users/alice@contoso.example", ["numbers_as_strings": true, "refresh_in": 1800, "foci": "1"])
        let body = try await harness.signIn("alice@contoso.example", scope: Self.scope)
        #expect(body["expires_in"] == .string("3600"))
        #expect(body["ext_expires_in"] == .string("3600"))
        #expect(body["refresh_in"] == .string("1800"))
        #expect(body["foci"] == .string("1"))
        _ = await harness.control("users/alice@contoso.example", ["numbers_as_strings": false, "foci": .null])
        let plain = try await harness.signIn("alice@contoso.example", scope: Self.scope)
        #expect(plain["expires_in"] == .int(3600))
        #expect(plain["foci"] == nil)
    }
}
