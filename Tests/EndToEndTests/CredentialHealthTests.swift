import Foundation
import Testing
import TokenRelayTesting

/// A rejected or expiring client credential turns readiness to `warn` (still 200) and shows in
/// `/metrics`, through the real binaries (behaviour §12 Problems, Health).
@Suite("Client credential health through the whole stack", .serialized)
struct CredentialHealthTests {
    static func refresh(_ stack: TokenRelayStack, _ id: String) async throws -> TestResponse {
        try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
    }

    static func credentialCheck(_ ready: TestResponse) -> [[String: Any]] {
        ((ready.json["checks"] as? [String: Any])?["client:credential"] as? [[String: Any]]) ?? []
    }

    static func outputs(_ ready: TestResponse) -> String {
        credentialCheck(ready).compactMap { $0["output"] as? String }.joined(separator: " | ")
    }

    @Test("AADSTS7000215: 502 upstream_error, account untouched, /readyz warns with the code and time, /metrics shows it, next success clears it")
    func rejectedSecretWarnsUntilNextSuccess() async throws {
        let stack = try await TokenRelayStack(name: "e2e_cred_rejected")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let before = try await stack.request("GET", "/readyz", authenticated: false)
        #expect(before.status == 200)
        #expect(before.json["status"] as? String == "pass", "\(before.text)")
        #expect(Self.credentialCheck(before).first?["status"] as? String == "pass")

        _ = try await stack.control(
            "POST", "/_control/faults",
            json: [
                "endpoint": "token", "status": 401, "error": "invalid_client", "error_codes": [7000215],
                "error_description": "Invalid client secret provided. Ensure the secret being sent in the request is the client secret value.",
            ])
        let refused = try await Self.refresh(stack, id)
        #expect(refused.status == 502, "\(refused.text)")
        #expect(refused.json["error"] as? String == "upstream_error")
        #expect(refused.json["sts_error_codes"] as? [Int] == [7000215])
        #expect(try await stack.request("GET", "/v1/accounts/\(id)").json["state"] as? String == "active")

        let warned = try await stack.request("GET", "/readyz", authenticated: false)
        #expect(warned.status == 200, "\(warned.text)")
        #expect(warned.headers["Content-Type"] == "application/health+json")
        #expect(warned.json["status"] as? String == "warn", "\(warned.text)")
        let entry = try #require(Self.credentialCheck(warned).first)
        #expect(entry["status"] as? String == "warn")
        #expect(entry["observedValue"] as? [Int] == [7000215])
        #expect((entry["time"] as? String)?.hasPrefix("20") == true)
        #expect(Self.outputs(warned).contains("AADSTS7000215"))
        let metrics = try await stack.request("GET", "/metrics", authenticated: false).text
        #expect(metrics.contains("\ntokenrelay_client_credential_rejected 1\n"), "\(metrics)")
        #expect(metrics.contains(#"tokenrelay_client_credential_rejections_total{code="7000215"} 1"#))

        // The fault is spent: the next refresh succeeds with the same credential and clears the warning.
        let served = try await Self.refresh(stack, id)
        #expect(served.status == 200, "\(served.text)")
        let cleared = try await stack.request("GET", "/readyz", authenticated: false)
        #expect(cleared.json["status"] as? String == "pass", "\(cleared.text)")
        #expect(try await stack.request("GET", "/metrics", authenticated: false).text.contains("\ntokenrelay_client_credential_rejected 0\n"))
    }

    @Test("AADSTS7000222: readiness says the client secret has expired")
    func expiredSecretSaysSo() async throws {
        let stack = try await TokenRelayStack(name: "e2e_cred_expired")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: [
                "endpoint": "token", "status": 401, "error": "invalid_client", "error_codes": [7000222],
                "error_description": "The provided client secret keys for app are expired.",
            ])
        let refused = try await Self.refresh(stack, id)
        #expect(refused.status == 502, "\(refused.text)")
        #expect(refused.json["sts_error_codes"] as? [Int] == [7000222])
        let warned = try await stack.request("GET", "/readyz", authenticated: false)
        #expect(warned.status == 200)
        #expect(warned.json["status"] as? String == "warn")
        #expect(Self.outputs(warned).contains("client secret has expired"), "\(warned.text)")
    }

    @Test("TOKENRELAY_CLIENT_SECRET_EXPIRES_AT within 14 days: readiness warns (200) and the expiring gauge is 1")
    func secretExpiringSoonWarns() async throws {
        let soon = Date().addingTimeInterval(3 * 86_400).formatted(.iso8601)
        let stack = try await TokenRelayStack(name: "e2e_cred_expiring", environment: ["TOKENRELAY_CLIENT_SECRET_EXPIRES_AT": soon])
        defer { stack.stop() }
        let ready = try await stack.request("GET", "/readyz", authenticated: false)
        #expect(ready.status == 200, "\(ready.text)")
        #expect(ready.json["status"] as? String == "warn", "\(ready.text)")
        #expect(Self.outputs(ready).contains("within 14 days"))
        let entry = try #require(Self.credentialCheck(ready).first)
        #expect(entry["observedUnit"] as? String == "d")
        #expect(((entry["observedValue"] as? Double) ?? 0) > 2.5)
        let metrics = try await stack.request("GET", "/metrics", authenticated: false).text
        #expect(metrics.contains("\ntokenrelay_client_credential_expiring 1\n"), "\(metrics)")
        #expect(metrics.contains("tokenrelay_client_credential_expiry_timestamp_seconds "))
    }
}
