import Foundation
import Testing
import TokenRelayTesting

/// A number no Double holds (`1e400`) makes `JSONSerialization` refuse the whole body; the answer
/// was 400 "not valid JSON" naming `body`. It names the member, as any other bad value of it
/// (new-user attack: `min_ttl_s: 1e400` on the silent route).
@Suite("A number out of range is named by its member, in process", .serialized)
struct NumberOutOfRangeTests {
    @Test("min_ttl_s: 1e400 on the silent, app and on-behalf-of routes is 400 naming min_ttl_s; a body cut short is still not JSON")
    func outOfRangeNumberIsNamed() async throws {
        let stack = try await InProcessApp(name: "inproc_number_range")
        defer { stack.stop() }
        let json = ["Content-Type": "application/json"]
        let cases: [(route: String, body: String, field: String)] = [
            ("/v1/tokens/silent", #"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":1e400}"#, "min_ttl_s"),
            ("/v1/tokens/silent", #"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":-1e400}"#, "min_ttl_s"),
            ("/v1/tokens/silent", #"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":1\#(String(repeating: "0", count: 400))}"#, "min_ttl_s"),
            ("/v1/tokens/silent", #"{"account_id":"a","scopes":["User.Read"],"claims":{"access_token":{"x":{"value":2e999}}}}"#, "claims.access_token.x.value"),
            ("/v1/tokens/app", #"{"scopes":["https://graph.microsoft.com/.default"],"min_ttl_s":1e400}"#, "min_ttl_s"),
            ("/v1/tokens/on-behalf-of", #"{"assertion":"a.b.c","scopes":["User.Read"],"min_ttl_s":1e400}"#, "min_ttl_s"),
            ("/v1/sign-ins", #"{"scopes":["User.Read"],"prompt":1e400}"#, "prompt"),
            ("/v1/tokens/silent", #"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":1e400"#, "body"),
            // No JSON numbers or strings at all: they were called a number out of range, or not Unicode text.
            ("/v1/tokens/silent", #"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":1.}"#, "body"),
            ("/v1/tokens/app", #"{"scopes":["https://graph.microsoft.com/.default"],"min_ttl_s":00}"#, "body"),
            ("/v1/tokens/silent", "{\"account_id\":\"a\",\"scopes\":[\"User.Read\tMail.Read\"]}", "body"),
            ("/v1/sign-ins", #"{"scopes":["User.Read"],"prompt":"\x41"}"#, "body"),
        ]
        for (route, body, field) in cases {
            let answer = try await stack.request("POST", route, body: Array(body.utf8), headers: json)
            #expect(answer.status == 400, "\(route) \(body.prefix(90)): \(answer.text)")
            #expect(answer.json["error"] as? String == "invalid_request", "\(route) \(body.prefix(90)): \(answer.text)")
            #expect(answer.json["field"] as? String == field, "\(route) \(body.prefix(90)): \(answer.text)")
            #expect(answer.headers["Content-Type"] == "application/problem+json", "\(route): \(answer.headers)")
        }
        // In range, but not a value of the field: the field's own rule, as before.
        let huge = try await stack.request(
            "POST", "/v1/tokens/silent", body: Array(#"{"account_id":"a","scopes":["User.Read"],"min_ttl_s":1e300}"#.utf8), headers: json)
        #expect(huge.status == 400 && huge.json["field"] as? String == "min_ttl_s", "\(huge.text)")
    }
}
