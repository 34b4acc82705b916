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

    /// Event and audit cursors were base64url of a position: a made-up position was read as one
    /// (behaviour Known gaps 9). Now they carry an HMAC under a key of the encryption key ring.
    @Test("Event and audit cursors are signed: an issued one pages; a made-up position, a changed one or an unsigned one is 400 naming cursor")
    func signedEventAndAuditCursors() async throws {
        let stack = try await InProcessApp(name: "inproc_signed_cursor")
        defer { stack.stop() }
        _ = try await stack.signInAccountId()
        _ = try await stack.signInAccountId("bob@contoso.example")
        for (route, prefix) in [("/v1/events", "e:"), ("/v1/audit", "au:")] {
            let first = try await stack.request("GET", "\(route)?limit=1")
            #expect(first.status == 200, "\(route): \(first.text)")
            let issued = try #require(first.json["next_cursor"] as? String, "\(route): \(first.text)")
            let second = try await stack.request("GET", "\(route)?limit=1&cursor=\(issued)")
            #expect(second.status == 200, "\(route): \(second.text)")
            var changed = Array(issued)
            changed[changed.count / 2] = changed[changed.count / 2] == "A" ? "B" : "A"
            // Observed before: 200, the made-up positions read as positions (past the end: an empty page).
            for cursor in [
                Base64URL.encode(Array("\(prefix)1".utf8)), Base64URL.encode(Array("\(prefix)999999".utf8)), String(changed),
                String(issued.dropLast(4)), issued + "AAAA",
            ] {
                let answer = try await stack.request("GET", "\(route)?cursor=\(cursor)")
                #expect(answer.status == 400, "\(route) \(cursor): \(answer.text)")
                #expect(answer.json["field"] as? String == "cursor", "\(route) \(cursor): \(answer.text)")
            }
            // A cursor of the other route is not one of this route's.
            let other = try await stack.request("GET", "\(route == "/v1/events" ? "/v1/audit" : "/v1/events")?limit=1")
            let foreign = try #require(other.json["next_cursor"] as? String, "\(other.text)")
            #expect(try await stack.request("GET", "\(route)?cursor=\(foreign)").status == 400)
        }
    }
}
