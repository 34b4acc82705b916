import Foundation
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

/// An encoded NUL in a downstream path is a control character (behaviour §6.2): 400 naming `path`,
/// before any call. Before, the bridge kept `%00` as three characters (so libmicrohttpd's C string
/// is not cut short) and the relay escaped them as text: `GET /v1/downstream/graph/me%00` was
/// relayed as `/v1.0/me%2500`, the same call as `me%2500` (found by the new-user attack), while
/// `%01` was refused.
@Suite("An encoded NUL in a downstream path is refused, in process", .serialized)
struct DownstreamEncodedNULTests {
    @Test("me%00, me%00x and users/a%00b are 400 field path with no Graph call; a literal %00 (%2500) is still relayed as text")
    func encodedNULIsAControlCharacter() async throws {
        let stack = try await InProcessApp(name: "inproc_downstream_nul")
        defer { stack.stop() }
        let alice = try await stack.signInAccountId()
        let before = try await stack.emulatorCount("graph_requests")
        for path in ["/v1/downstream/graph/me%00", "/v1/downstream/graph/me%00x", "/v1/downstream/graph/users/a%00b/messages"] {
            let refused = try await stack.request("GET", path, headers: ["X-Account-Id": alice])
            #expect(refused.status == 400, "\(path): \(refused.text)")
            #expect(refused.json["error"] as? String == "invalid_request", "\(path): \(refused.text)")
            #expect(refused.json["field"] as? String == "path", "\(path): \(refused.text)")
        }
        #expect(try await stack.emulatorCount("graph_requests") == before)
        // The text "%00" in a segment is the caller's to send, encoded as %2500.
        let literal = try await stack.request("GET", "/v1/downstream/graph/users/a%2500b", headers: ["X-Account-Id": alice])
        #expect(literal.headers["TokenRelay-Relayed"] == "true", "\(literal.text)")
        let requests = try await stack.control("GET", "/_control/graph-requests").json["requests"] as? [[String: Any]] ?? []
        #expect(requests.last?["path"] as? String == "/v1.0/users/a%2500b", "\(requests)")
    }
}
