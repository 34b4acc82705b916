import Foundation
import HTTPCommon
import Testing

@testable import STSEmulator

/// Faults the fidelity tests rely on: a B2C body on any authority (case 08) and claims in a
/// token error body as JSON text, base64 or an object.
@Suite("Emulator fidelity faults")
struct FidelityFaultTests {
    @Test func b2cFaultHasTheCodeOnlyInTheDescription() async throws {
        // cases/08-aadb2c90080-b2c-expired-grant
        let h = try EmulatorHarness()
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        _ = await h.control(
            "faults",
            ["endpoint": "token", "error": "invalid_grant", "error_codes": [90080], "b2c": true, "error_description": "The provided grant has expired."])
        let response = await h.refresh(a)
        #expect(response.status == 400)
        let body = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        #expect(Set(body.keys) == ["error", "error_description"])
        let description = try #require(JSONValue.parse(response.body)?["error_description"]?.stringValue)
        #expect(description.hasPrefix("AADB2C90080: The provided grant has expired.\r\nCorrelation ID: "))
    }

    @Test(arguments: ["json", "base64", "object"])
    func claimsInTokenErrorBody(_ encoding: String) async throws {
        let h = try EmulatorHarness()
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        let claims = #"{"access_token":{"acrs":{"essential":true,"value":"c1"}}}"#
        _ = await h.control(
            "faults", ["endpoint": "token", "error": "interaction_required", "claims_challenge": .string(claims), "claims_encoding": .string(encoding)])
        let value = try #require(JSONValue.parse(await h.refresh(a).body)?["claims"])
        switch encoding {
        case "base64": #expect(value.stringValue == Data(claims.utf8).base64EncodedString())
        case "object": #expect(value == JSONValue.parse(claims))
        default: #expect(value.stringValue == claims)
        }
    }

    @Test func unknownClaimsEncodingIsRefused() async throws {
        let h = try EmulatorHarness()
        #expect(await h.control("faults", ["endpoint": "token", "claims_challenge": "{}", "claims_encoding": "hex"]).status == 400)
    }
}
