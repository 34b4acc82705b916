import Foundation
import Testing
import TokenRelayTesting

/// An authority that refuses a sign-in's scopes or tenant redirects back with `error=invalid_scope`
/// (AADSTS70011) or `error=invalid_request` and AADSTS90002. The callback answered 502
/// `upstream_error` ("the service's own fault") with no `field`, while the same codes from the
/// token endpoint are 400 `invalid_scope` / `invalid_authority` naming the sign-in's `scopes` or
/// `authority` (behaviour §4.3; found by the new-user attack).
@Suite("The callback's refused scopes and authority are input problems naming their field, in process", .serialized)
struct CallbackRefusedRequestTests {
    @Test("error=invalid_scope (AADSTS70011) is 400 invalid_scope naming scopes; AADSTS90002 is 400 invalid_authority naming authority")
    func refusedScopesAndTenant() async throws {
        let stack = try await InProcessApp(name: "inproc_callback_refused")
        defer { stack.stop() }
        let body: [String: Any] = ["scopes": ["User.Read"], "login_hint": "alice@contoso.example"]
        let cases: [(query: String, error: String, field: String, code: Int)] = [
            (
                "error=invalid_scope&error_description=AADSTS70011%3A+The+provided+value+for+the+input+parameter+%27scope%27+is+not+valid.", "invalid_scope",
                "scopes", 70011
            ),
            ("error=invalid_request&error_description=AADSTS90002%3A+Tenant+not+found.", "invalid_authority", "authority", 90002),
        ]
        for (query, error, field, code) in cases {
            let state = try await CallbackSignInURLTests.start(stack, body)
            let answer = try await stack.request("GET", "/v1/sign-ins/callback?state=\(state)&\(query)", authenticated: false)
            #expect(answer.status == 400, "\(query): \(answer.text)")
            #expect(answer.json["error"] as? String == error, "\(query): \(answer.text)")
            #expect(answer.json["field"] as? String == field, "\(query): \(answer.text)")
            #expect(answer.json["sts_error_codes"] as? [Int] == [code], "\(query): \(answer.text)")
            #expect(answer.headers["Content-Type"] == "application/problem+json")
        }
    }
}
