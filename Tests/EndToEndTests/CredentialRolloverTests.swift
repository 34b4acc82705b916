import Foundation
import Testing
import TokenRelayTesting

/// Several client credentials tried in order (`TOKENRELAY_CLIENT_CREDENTIALS`, behaviour §7, §12
/// Health): a rejected one hands the request to the next, which is remembered; readiness and
/// `/metrics` say which is in use. A federated assertion file's `exp` shows in readiness.
@Suite("Client credentials that roll without a gap", .serialized)
struct CredentialRolloverTests {
    static let graphDefault = "https://graph.microsoft.com/.default"

    static func credentialCheck(_ ready: TestResponse) -> [[String: Any]] {
        ((ready.json["checks"] as? [String: Any])?["client:credential"] as? [[String: Any]]) ?? []
    }

    static func entry(_ ready: TestResponse, _ componentId: String) -> [String: Any]? {
        credentialCheck(ready).first { $0["componentId"] as? String == componentId }
    }

    static func list(_ entries: [[String: String]]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: entries), as: UTF8.self)
    }

    @Test("A certificate the identity provider rejects rolls to the next within the request (200), which stays in use; readiness warns and the metric names it")
    func rejectedCertificateRollsToTheNext() async throws {
        let retired = try await TestCertificate.make()
        let registered = try await TestCertificate.make()
        defer {
            retired.remove()
            registered.remove()
        }
        let stack = try await TokenRelayStack(
            name: "e2e_credential_rollover",
            environment: [
                "TOKENRELAY_CLIENT_SECRET": "",
                "TOKENRELAY_CLIENT_CREDENTIALS": try Self.list([["certificate": retired.combinedPath], ["certificate": registered.combinedPath]]),
            ],
            emulatorArguments: ["--client-certificate", registered.certificatePath])
        defer { stack.stop() }
        let before = try await stack.request("GET", "/readyz", authenticated: false)
        #expect(Self.entry(before, "in-use")?["status"] as? String == "pass", "\(before.text)")
        #expect(Self.entry(before, "in-use")?["credential"] as? Int == 1)

        let first = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault]])
        #expect(first.status == 200, "\(first.text)")
        #expect(first.json["source"] as? String == "identity_provider")
        var metrics = try await stack.request("GET", "/metrics", authenticated: false).text
        #expect(metrics.contains(#"tokenrelay_client_credential_fallbacks_total{from="1",to="2"} 1"#), "\(metrics)")
        #expect(metrics.contains(#"tokenrelay_client_credential_in_use{kind="certificate"} 2"#))

        // Remembered: the next request goes to the second certificate at once (no second fallback).
        let second = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": ["api://\(TokenRelayStack.clientId)/.default"]])
        #expect(second.status == 200, "\(second.text)")
        metrics = try await stack.request("GET", "/metrics", authenticated: false).text
        #expect(metrics.contains(#"tokenrelay_client_credential_fallbacks_total{from="1",to="2"} 1"#), "\(metrics)")
        #expect(metrics.contains("\ntokenrelay_client_credential_rejected 0\n"))

        let ready = try await stack.request("GET", "/readyz", authenticated: false)
        #expect(ready.status == 200, "\(ready.text)")
        #expect(ready.json["status"] as? String == "warn", "\(ready.text)")
        let inUse = try #require(Self.entry(ready, "in-use"))
        #expect(inUse["status"] as? String == "warn")
        #expect(inUse["credential"] as? Int == 2)
        #expect(inUse["kind"] as? String == "certificate")
        #expect((inUse["output"] as? String)?.contains("credential 2 of 2 (client certificate) is in use") == true, "\(inUse)")
        #expect((inUse["output"] as? String)?.contains("rejected credential 1 (AADSTS700027)") == true, "\(inUse)")
        #expect(stack.relay.log().contains("credential.fallback"))
        #expect(!stack.relay.log().contains("client_assertion="))
    }

    @Test("A secret list: a refresh token redeemed with a rejected secret rolls to the registered one (200); SIGHUP tries the first again; no secret is logged")
    func rejectedSecretRollsToTheNext() async throws {
        let stack = try await TokenRelayStack(name: "e2e_credential_rollover_secret")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        try await stack.restartRelay(environment: [
            "TOKENRELAY_CLIENT_SECRET": "",
            "TOKENRELAY_CLIENT_CREDENTIALS": try Self.list([["secret": "retired-secret-\(UUID().uuidString)"], ["secret": stack.clientSecret]]),
        ])
        let refreshed = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(refreshed.status == 200, "\(refreshed.text)")
        #expect(try await stack.request("GET", "/v1/accounts/\(id)").json["state"] as? String == "active")
        var metrics = try await stack.request("GET", "/metrics", authenticated: false).text
        #expect(metrics.contains(#"tokenrelay_client_credential_fallbacks_total{from="1",to="2"} 1"#), "\(metrics)")
        #expect(metrics.contains(#"tokenrelay_client_credential_in_use{kind="secret"} 2"#))
        let ready = try await stack.request("GET", "/readyz", authenticated: false)
        #expect((Self.entry(ready, "in-use")?["output"] as? String)?.contains("(AADSTS7000215)") == true, "\(ready.text)")

        // SIGHUP re-reads the list and starts again from the first.
        stack.relay.send(signal: SIGHUP)
        for _ in 0..<100 where !stack.relay.log().contains("credential.reloaded") { try await Task.sleep(for: .milliseconds(50)) }
        metrics = try await stack.request("GET", "/metrics", authenticated: false).text
        #expect(metrics.contains(#"tokenrelay_client_credential_in_use{kind="secret"} 1"#), "\(metrics)")
        #expect(!stack.relay.log().contains(stack.clientSecret))
        #expect(!stack.relay.log().contains("retired-secret-"))
    }

    @Test("One federated assertion file: readiness fails once the assertion's exp has passed, warns within 5 minutes of it, passes otherwise")
    func federatedAssertionExpiry() async throws {
        let certificate = try await TestCertificate.make()
        defer { certificate.remove() }
        let path = certificate.directory + "/federated-token"
        func write(lifetime: Int) throws {
            try certificate.clientAssertion(clientId: TokenRelayStack.clientId, audience: "https://login.example/token", lifetimeSeconds: lifetime)
                .write(toFile: path, atomically: true, encoding: .utf8)
        }
        try write(lifetime: -60)
        let stack = try await TokenRelayStack(
            name: "e2e_assertion_expiry", environment: ["TOKENRELAY_CLIENT_SECRET": "", "TOKENRELAY_CLIENT_ASSERTION_FILE": path],
            emulatorArguments: ["--client-certificate", certificate.certificatePath])
        defer { stack.stop() }
        let expired = try await stack.request("GET", "/readyz", authenticated: false)
        #expect(expired.status == 503, "\(expired.text)")
        #expect(expired.json["status"] as? String == "fail")
        let failed = try #require(Self.entry(expired, "assertion-expiry"))
        #expect(failed["status"] as? String == "fail")
        #expect((failed["output"] as? String)?.contains("expired at") == true)
        #expect(((failed["observedValue"] as? Double) ?? 0) < 0)
        #expect(try await stack.request("GET", "/metrics", authenticated: false).text.contains("\ntokenrelay_ready 0\n"))

        try write(lifetime: 120)
        let soon = try await stack.request("GET", "/readyz", authenticated: false)
        #expect(soon.status == 200, "\(soon.text)")
        #expect(soon.json["status"] as? String == "warn")
        #expect((Self.entry(soon, "assertion-expiry")?["output"] as? String)?.contains("within 5 minutes") == true, "\(soon.text)")

        try write(lifetime: 3600)
        let fresh = try await stack.request("GET", "/readyz", authenticated: false)
        #expect(fresh.json["status"] as? String == "pass", "\(fresh.text)")
        #expect(Self.entry(fresh, "assertion-expiry")?["status"] as? String == "pass")
        #expect(Self.entry(fresh, "assertion-expiry")?["observedUnit"] as? String == "s")
    }
}
