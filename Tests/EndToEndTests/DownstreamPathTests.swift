import Foundation
import Testing
import TokenRelayTesting

/// The path relayed to a downstream API (behaviour §6.2, §12 Downstream): dot segments, empty
/// segments and encoded ones are refused before any call; an encoded '/' stays in its segment.
@Suite("Downstream paths stay inside the API's base URL, segment by segment", .serialized)
struct DownstreamPathTests {
    @Test("Downstream paths cannot climb out of the API's base URL, nor hold empty segments")
    func downstreamDotSegments() async throws {
        let stack = try await TokenRelayStack(name: "e2e_dotdot")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let before = try await stack.emulatorCount("graph_requests")
        // Empty segments too (new-user attack: routing dropped them, and `me//messages` was relayed
        // as `/v1.0/me/messages`, `me/` as `/v1.0/me`).
        for path in [
            "/v1/downstream/graph/..%2F..%2Fetc", "/v1/downstream/graph/me/%2e%2e/%2e%2e/x", "/v1/downstream/graph/%2E%2E/x",
            "/v1/downstream/graph/me//messages", "/v1/downstream/graph//me", "/v1/downstream/graph/me/",
            // Dot segments with a `;` parameter or behind a `\\` (strict at the edges: these reached
            // the API as `/v1.0/..;/beta/x` and `/v1.0/..%5Cbeta`, which Tomcat and IIS read as `..`).
            "/v1/downstream/graph/%2e%2e;/beta/x", "/v1/downstream/graph/..%3b/beta/x", "/v1/downstream/graph/..;/secret",
            "/v1/downstream/graph/..%5cbeta", "/v1/downstream/graph/me/..%5C..%5Cbeta", "/v1/downstream/graph/.;x/me",
            "/v1/downstream/graph/me%5C..",
            // The generated clients' form (decoded once), hiding the same behind one more encoding.
            "/v1/downstream-encoded/graph/..%2F..%2Fetc", "/v1/downstream-encoded/graph/me%2F%252e%252e%2Fx",
            "/v1/downstream-encoded/graph/me%2F%2Fmessages", "/v1/downstream-encoded/graph/me%2F", "/v1/downstream-encoded/graph/x%2500",
        ] {
            let refused = try await stack.request("GET", path, headers: ["X-Account-Id": id])
            #expect(refused.status == 400, "\(path): \(refused.text)")
            #expect(refused.json["field"] as? String == "path")
        }
        #expect(try await stack.emulatorCount("graph_requests") == before)
    }

    @Test("An encoded '/' in a downstream path stays inside its segment on the way to the API (users%2Falice was relayed as users/alice)")
    func downstreamEncodedSlash() async throws {
        let stack = try await TokenRelayStack(name: "e2e_encoded_slash")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        // Graph's `users/{id | userPrincipalName}`: the emulator decodes the one segment it got.
        let user = try await stack.request("GET", "/v1/downstream/graph/users/alice%40contoso.example%2Fx%25y", headers: ["X-Account-Id": id])
        #expect(user.status == 404, "\(user.text)")
        let requests = try await stack.control("GET", "/_control/graph-requests").json["requests"] as? [[String: Any]] ?? []
        #expect(requests.map { $0["path"] as? String } == ["/v1.0/users/alice@contoso.example%2Fx%25y"])
        // Dot segments hidden behind an encoded '/' are refused like plain ones, before any call.
        let hidden = try await stack.request("GET", "/v1/downstream/graph/me%2F..%2F..%2Fbeta%2Fme", headers: ["X-Account-Id": id])
        #expect(hidden.status == 400, "\(hidden.text)")
        #expect(hidden.json["field"] as? String == "path")
        #expect(try await stack.emulatorCount("graph_requests") == 1)
    }
}
