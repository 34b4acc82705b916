import Foundation
import Testing
import TokenRelayTesting

/// A 400 input problem the identity platform decides (AADSTS90002 tenant not found →
/// `invalid_authority`, AADSTS70011 → `invalid_scope`) names the field the request chose it with,
/// as TokenRelay's own refusals do (behaviour §4.1, §4.3; openapi `RelayError`: invalid_authority has
/// `field`). It used to carry `sts_error_codes` and no `field`.
@Suite("STS input refusals name their field, in process", .serialized)
struct STSInputProblemFieldTests {
    static let graphDefault = "https://graph.microsoft.com/.default"

    /// Asserts a 400 `error` with `sts_error_codes: [code]` naming `field`.
    static func expectRefused(_ response: TestResponse, _ error: String, code: Int, field: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(response.status == 400, "\(response.text)", sourceLocation: sourceLocation)
        #expect(response.json["error"] as? String == error, "\(response.text)", sourceLocation: sourceLocation)
        #expect(response.json["sts_error_codes"] as? [Int] == [code], "\(response.text)", sourceLocation: sourceLocation)
        #expect(response.json["field"] as? String == field, "\(response.text)", sourceLocation: sourceLocation)
    }

    @Test("A tenant the platform does not know is invalid_authority naming tenant_id or authority, as the caller sent it")
    func unknownTenantNamesItsField() async throws {
        let stack = try await InProcessApp(name: "inproc_sts_field_tenant")
        defer { stack.stop() }
        let unknownAuthority = "\(stack.emulator.baseURL)/nope.example"

        let byTenant = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault], "tenant_id": "nope.example"])
        Self.expectRefused(byTenant, "invalid_authority", code: 90002, field: "tenant_id")
        let byAuthority = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault], "authority": unknownAuthority])
        Self.expectRefused(byAuthority, "invalid_authority", code: 90002, field: "authority")

        let id = try await stack.signInAccountId()
        let silent = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "authority": unknownAuthority, "force_refresh": true])
        Self.expectRefused(silent, "invalid_authority", code: 90002, field: "authority")
    }

    @Test("Refusals of an authority or scopes the caller did not spell out name authority and scopes (resource when sent)")
    func defaultsNameTheMemberThatChoosesThem() async throws {
        let stack = try await InProcessApp(name: "inproc_sts_field_default")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        func fault(_ code: Int, _ error: String) async throws {
            let queued = try await stack.control(
                "POST", "/_control/faults", json: ["endpoint": "token", "status": 400, "error": error, "error_codes": [code], "error_description": "Emulated."])
            #expect(queued.status == 201, "\(queued.text)")
        }

        // The configured default authority (app) and the account's own (silent): the request's
        // `authority` member is the one that would choose another.
        try await fault(90002, "invalid_request")
        let app = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault]])
        Self.expectRefused(app, "invalid_authority", code: 90002, field: "authority")
        try await fault(90002, "invalid_request")
        let silent = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        Self.expectRefused(silent, "invalid_authority", code: 90002, field: "authority")

        try await fault(70011, "invalid_scope")
        let scopes = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault], "force_refresh": true])
        Self.expectRefused(scopes, "invalid_scope", code: 70011, field: "scopes")
        try await fault(70011, "invalid_scope")
        let resource = try await stack.request("POST", "/v1/tokens/app", json: ["resource": "https://graph.microsoft.com", "force_refresh": true])
        Self.expectRefused(resource, "invalid_scope", code: 70011, field: "resource")
        try await fault(70011, "invalid_scope")
        let silentScopes = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["Mail.Read"]])
        Self.expectRefused(silentScopes, "invalid_scope", code: 70011, field: "scopes")
        try await fault(70011, "invalid_scope")
        let silentResource = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": id, "resource": "https://graph.microsoft.com", "force_refresh": true])
        Self.expectRefused(silentResource, "invalid_scope", code: 70011, field: "resource")
    }
}
