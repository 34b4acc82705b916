import Foundation
import Testing
import TokenRelayTesting

/// A 404 quoted the whole path in its detail: a 7,000-byte path made a 7,190-byte answer (found by
/// a new-user try).
@Suite("An unknown route's 404, in process", .serialized)
struct UnknownRouteTests {
    @Test("A 404 names the method and path, a long path cut to its first 200 characters")
    func longPathIsCutInTheDetail() async throws {
        let stack = try await InProcessApp(name: "inproc_unknown_route")
        defer { stack.stop() }
        let short = try await stack.request("GET", "/v1/no-such-route")
        #expect(short.status == 404)
        #expect(short.json["detail"] as? String == "No route matches GET /v1/no-such-route.", "\(short.text)")
        let long = "/v1/" + String(repeating: "a", count: 7_000)
        let answer = try await stack.request("GET", long)
        #expect(answer.status == 404)
        let detail = answer.json["detail"] as? String ?? ""
        #expect(detail == "No route matches GET \(long.prefix(200))….", "\(detail.prefix(300))")
        #expect(answer.body.count < 1_000, "\(answer.body.count) bytes")
    }
}
