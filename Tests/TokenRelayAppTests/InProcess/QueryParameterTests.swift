import Foundation
import HTTPClientBridge
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore
import TokenRelayTesting

/// One rule for query parameters on every route (behaviour §7.4): a route takes the parameters it
/// declares, and any other is 400 `invalid_request` naming it. Before, only the three list routes
/// refused one (each with its own loop), and every other route ignored it: `GET
/// /v1/accounts/{id}?bogus=1` answered the account, `DELETE ...?bogus=1` deleted it (found by the
/// new-user attack).
@Suite("Query parameters a route does not take are refused, in process", .serialized)
struct QueryParameterTests {
    @Test("Every route that takes no query parameter, or only some, answers an unknown one with 400 naming it, and does nothing")
    func unknownParameterIsRefusedEverywhere() async throws {
        let stack = try await InProcessApp(name: "inproc_query_unknown")
        defer { stack.stop() }
        let alice = try await stack.signInAccountId()
        let values = ["account_id": alice, "tenant_id": stack.tenantId, "api": "graph", "path": "me"]
        var checked = 0
        for route in stack.dependencies.router.routes where route.query != .any {
            let path = route.template.split(separator: "/").map { segment in
                guard segment.hasPrefix("{") else { return String(segment) }
                return values[String(segment.dropFirst().dropLast().replacingOccurrences(of: "...", with: ""))] ?? "x"
            }
            let target = "/" + path.joined(separator: "/") + "?bogus=1"
            let answer = try await stack.request(route.method, target, json: route.method == "POST" ? [:] as [String: Any] : nil)
            #expect(answer.status == 400, "\(route.method) \(target): \(answer.text)")
            #expect(answer.json["error"] as? String == "invalid_request", "\(route.method) \(target): \(answer.text)")
            #expect(answer.json["field"] as? String == "bogus", "\(route.method) \(target): \(answer.text)")
            #expect((answer.json["detail"] as? String)?.contains("'bogus'") == true, "\(route.method) \(target): \(answer.text)")
            checked += 1
        }
        #expect(checked >= 15, "only \(checked) routes were tried")
        // The refused DELETE and suspend changed nothing.
        #expect(try await stack.request("GET", "/v1/accounts/\(alice)").status == 200)
        let tenants = try await stack.request("GET", "/v1/tenants")
        let tenant = (tenants.json["tenants"] as? [[String: Any]])?.first { $0["tenant_id"] as? String == stack.tenantId }
        #expect(tenant?["suspended"] as? Bool == false, "\(tenants.text)")
        // A parameter sent without a value, or with one not taken by the route, is named too.
        let bare = try await stack.request("GET", "/v1/accounts/\(alice)?expand")
        #expect(bare.status == 400 && bare.json["field"] as? String == "expand", "\(bare.text)")
        let listed = try await stack.request("GET", "/v1/events?limit=5&username=alice")
        #expect(listed.status == 400 && listed.json["field"] as? String == "username", "\(listed.text)")
        #expect(listed.json["detail"] as? String == "Unknown query parameter 'username'; use cursor or limit.", "\(listed.text)")
    }

    @Test("Routes that take query parameters keep taking them: lists, downstream calls and the sign-in callback's extra parameters")
    func declaredParametersStillWork() async throws {
        let stack = try await InProcessApp(name: "inproc_query_declared")
        defer { stack.stop() }
        let alice = try await stack.signInAccountId()
        for target in ["/v1/accounts?limit=1&username=alice%40contoso.example", "/v1/events?limit=1", "/v1/tenants?limit=1&cursor="] {
            let answer = try await stack.request("GET", target)
            #expect(answer.status == 200, "\(target): \(answer.text)")
        }
        // The downstream query is the API's own, passed on.
        let graph = try await stack.request("GET", "/v1/downstream/graph/me?$select=displayName&bogus=1", headers: ["X-Account-Id": alice])
        #expect(graph.status == 200, "\(graph.text)")

        // The identity platform adds parameters besides `code` and `state` (the emulator sends
        // `session_state`; `client_info`, `cloud_instance_name`, `iss` and others of its own):
        // the callback ignores them (RFC 6749 §4.1.2).
        let started = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": "bob@contoso.example"])
        let authorize = try #require(started.json["authorize_url"] as? String, "\(started.text)")
        let redirect = try await stack.browser.execute(HTTPClientRequest(method: "GET", url: authorize))
        let location = try #require(redirect.headers["Location"])
        #expect(location.contains("session_state="), "\(location)")
        let extra = "&client_info=eyJ1aWQiOiJ4In0&cloud_instance_name=microsoftonline.com&iss=https%3A%2F%2Flogin.example%2Fv2.0&something_new=1"
        let callback = try await stack.request("GET", location + extra, authenticated: false)
        #expect(callback.status == 200, "\(callback.text)")
        #expect((callback.json["account"] as? [String: Any])?["username"] as? String == "bob@contoso.example", "\(callback.text)")
    }

    /// `?tenant_id=notauuid` answered 200 with an empty page, as if no account were there.
    @Test("GET /v1/accounts?tenant_id= takes a tenant id or a domain name; other text is 400 naming tenant_id; empty is no filter")
    func tenantFilterIsATenant() async throws {
        let stack = try await InProcessApp(name: "inproc_query_tenant")
        defer { stack.stop() }
        _ = try await stack.signInAccountId()
        for value in ["notauuid", "common", "72f988bf-86f1-41af-91ab", "contoso.onmicrosoft.com%2Fx"] {
            let answer = try await stack.request("GET", "/v1/accounts?tenant_id=\(value)")
            #expect(answer.status == 400 && answer.json["field"] as? String == "tenant_id", "\(value): \(answer.text)")
        }
        for (value, count) in [(stack.tenantId, 1), ("contoso.onmicrosoft.com", 0), ("", 1)] {
            let answer = try await stack.request("GET", "/v1/accounts?tenant_id=\(value)")
            #expect(answer.status == 200 && (answer.json["accounts"] as? [Any])?.count == count, "\(value): \(answer.text)")
        }
    }
}
