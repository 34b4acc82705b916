import Foundation
import Testing
import TokenRelayTesting

/// SIGHUP re-reads the client credential (behaviour §11): a secret rotated in its `_FILE` is used
/// without a restart; a credential setting that cannot be read keeps the one in use.
@Suite("Client credential reload on SIGHUP")
struct CredentialReloadTests {
    @Test("A secret rotated in TOKENRELAY_CLIENT_SECRET_FILE is used after SIGHUP; an unreadable file keeps the old one")
    func hangupReloadsSecret() async throws {
        let file = TestLogs.directory + "/client-secret-\(UUID().uuidString).txt"
        defer { try? FileManager.default.removeItem(atPath: file) }
        let stack = try await TokenRelayStack(name: "e2e_credential_reload")
        defer { stack.stop() }
        try Data(stack.clientSecret.utf8).write(to: URL(fileURLWithPath: file))
        try await stack.restartRelay(environment: ["TOKENRELAY_CLIENT_SECRET": "", "TOKENRELAY_CLIENT_SECRET_FILE": file])
        let alice = try await stack.signInAccountId("alice@contoso.example")
        func refresh() async throws -> TestResponse {
            try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": alice, "scopes": ["User.Read"], "force_refresh": true])
        }
        func hangup(expecting event: String) async throws {
            let seen = stack.relay.log().components(separatedBy: event).count
            stack.relay.send(signal: SIGHUP)
            for _ in 0..<100 where stack.relay.log().components(separatedBy: event).count == seen {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(stack.relay.log().components(separatedBy: event).count == seen + 1, "no \(event) after SIGHUP")
        }
        #expect(try await refresh().status == 200)

        // A secret the identity platform does not know: the reload is real, the STS refuses it.
        try Data("not-the-registered-secret".utf8).write(to: URL(fileURLWithPath: file))
        try await hangup(expecting: "credential.reloaded")
        let refused = try await refresh()
        #expect(refused.status == 502, "\(refused.text)")
        #expect(refused.json["error"] as? String == "upstream_error")

        // Back to the registered secret: served again, no restart.
        try Data(stack.clientSecret.utf8).write(to: URL(fileURLWithPath: file))
        try await hangup(expecting: "credential.reloaded")
        #expect(try await refresh().status == 200)

        // The file disappears: logged, and the secret in use stays.
        try FileManager.default.removeItem(atPath: file)
        try await hangup(expecting: "configuration.reload_failed")
        #expect(try await refresh().status == 200)
        #expect(!stack.relay.log().contains(stack.clientSecret))
    }
}
