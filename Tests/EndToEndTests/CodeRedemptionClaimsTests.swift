import Foundation
import HTTPClientBridge
import Testing
import TokenRelayTesting

/// The authorization-code redemption of a sign-in carries the client capabilities (behaviour §1
/// "Claims challenge": every token request carries `xms_cc` when `client_capabilities` is set;
/// issue 10 item 2; identity platform "Claims challenges, claims requests, and client
/// capabilities"), merged with the claims the sign-in was asked to satisfy, as every refresh
/// does: the first token a user gets is CAE-capable. The emulator's `/_control/token-requests`
/// shows what each token request sent.
@Suite("A sign-in's code redemption sends the client capabilities and the challenge claims", .serialized)
struct CodeRedemptionClaimsTests {
    static let capabilityOnly = #"{"access_token":{"xms_cc":{"values":["cp1"]}}}"#
    static let acrs = #"{"access_token":{"acrs":{"essential":true,"value":"c1"}}}"#
    static let acrsWithCapability = #"{"access_token":{"acrs":{"essential":true,"value":"c1"},"xms_cc":{"values":["cp1"]}}}"#

    static func object(_ text: String?) -> NSDictionary? {
        guard let text else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? NSDictionary
    }

    /// The `claims` of the emulator's newest token request with `grantType` (nil: none sent).
    static func lastClaims(_ stack: TokenRelayStack, grantType: String) async throws -> String?? {
        let requests = try await stack.control("GET", "/_control/token-requests").json["requests"] as? [[String: Any]] ?? []
        guard let last = requests.last(where: { $0["grant_type"] as? String == grantType }) else { return .none }
        return .some(last["claims"] as? String)
    }

    @Test("With TOKENRELAY_CLIENT_CAPABILITIES=cp1 the code redemption sends xms_cc, alone or merged with the sign-in's claims, as a refresh does")
    func codeRedemptionCarriesCapabilities() async throws {
        let stack = try await TokenRelayStack(name: "e2e_code_claims", environment: ["TOKENRELAY_CLIENT_CAPABILITIES": "cp1"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let redeemed = try await Self.lastClaims(stack, grantType: "authorization_code")
        #expect(redeemed != nil, "the emulator saw a code redemption")
        #expect(Self.object(redeemed ?? nil) == Self.object(Self.capabilityOnly), "code redemption claims: \(String(describing: redeemed))")

        let refreshed = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(refreshed.status == 200, "\(refreshed.text)")
        #expect(Self.object(try await Self.lastClaims(stack, grantType: "refresh_token") ?? nil) == Self.object(Self.capabilityOnly))

        // A sign-in asked to satisfy claims redeems its code with them and the capabilities.
        let started = try await stack.request(
            "POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": "alice@contoso.example", "claims": Self.acrs])
        #expect(started.status == 201, "\(started.text)")
        let authorize = try #require(started.json["authorize_url"] as? String)
        let redirect = try await stack.http.execute(HTTPClientRequest(method: "GET", url: authorize))
        let callback = try await stack.request("GET", try #require(redirect.headers["Location"]), authenticated: false)
        #expect(callback.status == 200, "\(callback.text)")
        let challenged = try await Self.lastClaims(stack, grantType: "authorization_code")
        #expect(Self.object(challenged ?? nil) == Self.object(Self.acrsWithCapability), "code redemption claims: \(String(describing: challenged))")
    }

    @Test("Without client capabilities or claims, the code redemption sends no claims")
    func noCapabilitiesNoClaims() async throws {
        let stack = try await TokenRelayStack(name: "e2e_code_noclaims")
        defer { stack.stop() }
        _ = try await stack.signInAccountId()
        let redeemed = try await Self.lastClaims(stack, grantType: "authorization_code")
        #expect(redeemed != nil, "the emulator saw a code redemption")
        #expect((redeemed ?? nil) == nil, "\(String(describing: redeemed))")
    }
}
