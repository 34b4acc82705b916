import CryptoBridge
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

/// A cursor is opaque, but its encoding is plain base64url of `a:<account id>` / `t:<tenant id>`,
/// so a caller can forge one. Before, a forged cursor holding a NUL reached PostgreSQL and the
/// answer was 400 naming the field `input` ("Text values may not contain NUL"), which no request
/// has (found by the new-user attack). Now it is a cursor this service did not issue: 400 naming
/// `cursor`, as any other forged one.
@Suite("Forged list cursors are 400 naming cursor, in process", .serialized)
struct ForgedCursorTests {
    @Test("A cursor whose text holds a NUL or another control character is 400 naming cursor on /v1/accounts and /v1/tenants")
    func controlCharactersInCursors() async throws {
        let stack = try await InProcessApp(name: "inproc_forged_cursor")
        defer { stack.stop() }
        _ = try await stack.signInAccountId()
        for (route, prefix) in [("/v1/accounts", "a:"), ("/v1/tenants", "t:")] {
            for text in ["\(prefix)\u{0}x", "\(prefix)acc\u{0}", "\(prefix)\u{1}", "\(prefix)x\n"] {
                let cursor = Base64URL.encode(Array(text.utf8))
                let answer = try await stack.request("GET", "\(route)?cursor=\(cursor)")
                #expect(answer.status == 400, "\(route) \(text.debugDescription): \(answer.text)")
                #expect(answer.json["error"] as? String == "invalid_request", "\(route) \(text.debugDescription): \(answer.text)")
                #expect(answer.json["field"] as? String == "cursor", "\(route) \(text.debugDescription): \(answer.text)")
            }
            // A cursor the service issued still pages.
            let first = try await stack.request("GET", "\(route)?limit=1")
            #expect(first.status == 200, "\(first.text)")
        }
    }
}
