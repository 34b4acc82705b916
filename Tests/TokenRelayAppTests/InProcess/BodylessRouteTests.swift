import Foundation
import Testing
import TokenRelayHTTP
import TokenRelayTesting

/// One rule for request bodies (behaviour §7.4), as for query parameters: a route that takes no
/// body answers one with 400 `invalid_request` naming `body`, and does nothing. Before, it was
/// ignored: a `POST .../suspend` with `{"reason": ...}` suspended the tenant and the reason was
/// lost without a word (found by a new-user try).
@Suite("A body on a route that takes none is refused, in process", .serialized)
struct BodylessRouteTests {
    @Test("Every route that takes no body answers one with 400 naming body, and does nothing; without a body it is served")
    func bodyIsRefusedEverywhere() async throws {
        let stack = try await InProcessApp(name: "inproc_bodyless")
        defer { stack.stop() }
        let alice = try await stack.signInAccountId()
        let values = ["account_id": alice, "tenant_id": stack.tenantId, "api": "graph", "path": "me"]
        var checked = 0
        for route in stack.dependencies.router.routes where route.body == .none {
            let path = route.template.split(separator: "/").map { segment in
                guard segment.hasPrefix("{") else { return String(segment) }
                return values[String(segment.dropFirst().dropLast().replacingOccurrences(of: "...", with: ""))] ?? "x"
            }
            let target = "/" + path.joined(separator: "/")
            let answer = try await stack.request(route.method, target, json: ["reason": "x"])
            #expect(answer.status == 400, "\(route.method) \(target): \(answer.text)")
            #expect(answer.json["error"] as? String == "invalid_request", "\(route.method) \(target): \(answer.text)")
            #expect(answer.json["field"] as? String == "body", "\(route.method) \(target): \(answer.text)")
            checked += 1
        }
        #expect(checked >= 14, "only \(checked) routes were tried")
        // The refused DELETE and suspend changed nothing; without a body they are served.
        #expect(try await stack.request("GET", "/v1/accounts/\(alice)").status == 200)
        let tenants = try await stack.request("GET", "/v1/tenants")
        let tenant = (tenants.json["tenants"] as? [[String: Any]])?.first { $0["tenant_id"] as? String == stack.tenantId }
        #expect(tenant?["suspended"] as? Bool == false, "\(tenants.text)")
        #expect(try await stack.request("POST", "/v1/tenants/\(stack.tenantId)/suspend").status == 200)
        #expect(try await stack.request("POST", "/v1/tenants/\(stack.tenantId)/resume").status == 200)
        #expect(try await stack.request("DELETE", "/v1/accounts/\(alice)").status == 204)
    }

    @Test("Routes that read their body themselves keep it: the silent route and the downstream relay")
    func rawBodiesStay() async throws {
        let stack = try await InProcessApp(name: "inproc_bodyless_raw")
        defer { stack.stop() }
        let routes = stack.dependencies.router.routes.filter { $0.body == .raw }.map(\.template)
        #expect(Set(routes) == ["/v1/tokens/silent", "/v1/downstream/{api}/{path...}", "/v1/downstream-encoded/{api}/{path...}"])
    }
}
