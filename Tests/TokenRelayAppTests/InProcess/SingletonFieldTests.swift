import Foundation
import Testing
import TokenRelayTesting

/// A header or query parameter that names one thing, sent twice, is 400 naming it: before, the
/// first was used and the second ignored, so a proxy reading the last and TokenRelay reading the
/// first acted on different keys, accounts or pages (RFC 9110 §5.3, RFC 6749 §3.1).
@Suite("Singleton headers and query parameters, in process", .serialized)
struct SingletonFieldTests {
    @Test("Authorization, Request-Timeout, Content-Type or X-Account-Id twice is 400 naming the header")
    func repeatedHeaders() async throws {
        let stack = try await InProcessApp(name: "inproc_singleton_headers")
        defer { stack.stop() }
        let alice = try #require((try await stack.signIn("alice@contoso.example")["account"] as? [String: Any])?["account_id"] as? String)
        let body = Array(#"{"account_id":"\#(alice)","scopes":["User.Read"]}"#.utf8)
        let json = ["Content-Type": "application/json"]
        let fine = try await stack.request("POST", "/v1/tokens/silent", body: body, headers: json)
        #expect(fine.status == 200, "\(fine.text)")

        let cases: [(name: String, value: String, extra: [String: String])] = [
            ("Authorization", "Bearer \(stack.apiKey)", json),
            ("Request-Timeout", "5", json.merging(["Request-Timeout": "30"]) { $1 }),
            ("Content-Type", "text/plain", json),
        ]
        for (name, value, extra) in cases {
            let twice = try await stack.request("POST", "/v1/tokens/silent", body: body, headers: extra, repeated: [(name, value)])
            #expect(twice.status == 400, "\(name): \(twice.text)")
            #expect(twice.json["error"] as? String == "invalid_request", "\(name): \(twice.text)")
            #expect(twice.json["field"] as? String == name, "\(name): \(twice.text)")
        }

        let graph = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": alice])
        #expect(graph.status == 200, "\(graph.text)")
        let twoAccounts = try await stack.request(
            "GET", "/v1/downstream/graph/me", body: [], headers: ["X-Account-Id": alice], repeated: [("x-account-id", "acc_someone_else")])
        #expect(twoAccounts.status == 400, "\(twoAccounts.text)")
        #expect(twoAccounts.json["field"] as? String == "X-Account-Id", "\(twoAccounts.text)")
    }

    @Test("limit, cursor, username or tenant_id twice in a list, or code or state twice in the sign-in callback, is 400 naming it")
    func repeatedQueryParameters() async throws {
        let stack = try await InProcessApp(name: "inproc_singleton_query")
        defer { stack.stop() }
        _ = try await stack.signIn("alice@contoso.example")
        #expect(try await stack.request("GET", "/v1/accounts?limit=1").status == 200)
        let targets: [(target: String, field: String)] = [
            ("/v1/accounts?limit=1&limit=500", "limit"),
            ("/v1/accounts?username=alice%40contoso.example&username=bob%40contoso.example", "username"),
            ("/v1/accounts?tenant_id=a&tenant_id=b", "tenant_id"),
            ("/v1/accounts?cursor=a&cursor=b", "cursor"),
            ("/v1/events?limit=5&limit=6", "limit"),
            ("/v1/tenants?cursor=a&cursor=b", "cursor"),
        ]
        for (target, field) in targets {
            let answer = try await stack.request("GET", target)
            #expect(answer.status == 400, "\(target): \(answer.text)")
            #expect(answer.json["field"] as? String == field, "\(target): \(answer.text)")
        }
        for (target, field) in [
            ("/v1/sign-ins/callback?code=a&code=b&state=s", "code"), ("/v1/sign-ins/callback?code=a&state=s&state=t", "state"),
        ] {
            let answer = try await stack.request("GET", target, authenticated: false)
            #expect(answer.status == 400, "\(target): \(answer.text)")
            #expect(answer.json["field"] as? String == field, "\(target): \(answer.text)")
        }
    }
}
