import Foundation
import HTTPClientBridge
import Testing
import TokenRelayTesting

/// The case files (shared/cases) not covered elsewhere, the UI-required memory (behaviour §5), claims
/// challenges both ways (behaviour §1, §6) and signed `sign_in_url`s (behaviour §3), through the real binaries.
@Suite("Identity-platform fidelity through the whole stack", .serialized)
struct FidelityEndToEndTests {
    static let alice = "alice@contoso.example"
    static let nbfClaims = #"{"access_token":{"nbf":{"essential":true,"value":"1657834417"}}}"#

    static func silent(_ stack: TokenRelayStack, _ id: String, _ scopes: [String], extra: [String: Any] = [:]) async throws -> TestResponse {
        try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": scopes].merging(extra) { $1 })
    }

    static func object(_ text: String?) -> NSDictionary? {
        guard let text else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? NSDictionary
    }

    /// Follows a `sign_in_url` through the authority and the callback; returns the callback's answer.
    static func complete(_ stack: TokenRelayStack, signInURL: String) async throws -> TestResponse {
        let start = try await stack.request("GET", signInURL, authenticated: false)
        guard start.status == 302, let authorize = start.headers["Location"] else { throw TestFailure("start answered \(start.status): \(start.text)") }
        let redirect = try await stack.http.execute(HTTPClientRequest(method: "GET", url: authorize))
        guard redirect.status == 302, let callback = redirect.headers["Location"] else { throw TestFailure("authorize answered \(redirect.status)") }
        return try await stack.request("GET", callback, authenticated: false)
    }

    @Test("05-aadsts50173-grant-revoked-password-change: dead without suberror; durable; a new sign-in recovers")
    func grantRevoked() async throws {
        let stack = try await TokenRelayStack(name: "e2e_fid_50173")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control("POST", "/_control/users/\(Self.alice)", json: ["revoke_refresh_tokens": true])
        let refused = try await Self.silent(stack, id, ["User.Read"], extra: ["force_refresh": true])
        #expect(refused.status == 409, "\(refused.text)")
        #expect(refused.json["sts_error_codes"] as? [Int] == [50173])
        #expect(refused.json["suberror"] == nil, "absent when the STS sent none")
        #expect(refused.json["account_state"] as? String == "interaction_required")
        #expect(refused.json["sts_trace_id"] as? String != nil)
        #expect(refused.json["sts_correlation_id"] as? String != nil)
        let before = try await stack.emulatorCount()
        let again = try await Self.silent(stack, id, ["Mail.Read"])
        #expect(again.status == 409)
        #expect(try await stack.emulatorCount() == before)
        // The problem's sign_in_url signs the same user in again; the account is usable after it.
        let signInURL = try #require(again.json["sign_in_url"] as? String)
        #expect(signInURL.contains("login_hint=alice%40contoso.example"))
        let callback = try await Self.complete(stack, signInURL: signInURL)
        #expect(callback.status == 200, "\(callback.text)")
        #expect((callback.json["account"] as? [String: Any])?["account_id"] as? String == id)
        #expect(try await Self.silent(stack, id, ["Mail.Read"]).status == 200)
    }

    @Test("06-aadsts65001-consent-required: consent lists the scopes, keeps the refresh token, and the sign_in_url consents")
    func consentRequired() async throws {
        let stack = try await TokenRelayStack(name: "e2e_fid_65001")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control("POST", "/_control/users/\(Self.alice)", json: ["consent_required_scopes": ["Calendars.ReadWrite"]])
        let refused = try await Self.silent(stack, id, ["Mail.Read", "https://graph.microsoft.com/Calendars.ReadWrite"])
        #expect(refused.status == 409, "\(refused.text)")
        #expect(refused.json["suberror"] as? String == "consent_required")
        #expect(refused.json["sts_error_codes"] as? [Int] == [65001])
        #expect(refused.json["scopes"] as? [String] == ["Calendars.ReadWrite", "Mail.Read"])
        #expect(refused.json["account_state"] as? String == "active")
        #expect(try await Self.silent(stack, id, ["Mail.Read"], extra: ["force_refresh": true]).status == 200)
        let signInURL = try #require(refused.json["sign_in_url"] as? String)
        #expect(try await Self.complete(stack, signInURL: signInURL).status == 200)
        let consented = try await Self.silent(stack, id, ["Mail.Read", "Calendars.ReadWrite"], extra: ["force_refresh": true])
        #expect(consented.status == 200, "\(consented.text)")
    }

    @Test("08-aadb2c90080-b2c-expired-grant: the B2C code is read from error_description; the account is dead")
    func b2cExpiredGrant() async throws {
        let stack = try await TokenRelayStack(name: "e2e_fid_90080")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: [
                "endpoint": "token", "status": 400, "error": "invalid_grant", "error_codes": [90080], "b2c": true,
                "error_description": "The provided grant has expired. Please re-authenticate and try again. Current time: 1587023649",
            ])
        let refused = try await Self.silent(stack, id, ["User.Read"], extra: ["force_refresh": true])
        #expect(refused.status == 409, "\(refused.text)")
        #expect(refused.json["sts_error_codes"] as? [Int] == [90080])
        #expect(refused.json["suberror"] == nil)
        #expect(refused.json["account_state"] as? String == "interaction_required")
        #expect((refused.json["detail"] as? String)?.hasPrefix("AADB2C90080: The provided grant has expired") == true)
        #expect(try await stack.request("GET", "/v1/accounts/\(id)").json["state"] as? String == "interaction_required")
    }

    @Test("13-refresh-token-rotation-success: each refresh uses the rotated refresh token; none is rejected as superseded")
    func rotation() async throws {
        let stack = try await TokenRelayStack(name: "e2e_fid_rotation")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        var tokens: Set<String> = []
        for _ in 0..<3 {
            let served = try await Self.silent(stack, id, ["User.Read", "Mail.Read"], extra: ["force_refresh": true])
            #expect(served.status == 200, "\(served.text)")
            tokens.insert(served.json["access_token"] as? String ?? "")
        }
        #expect(tokens.count == 3)
        let chain = try await stack.control("GET", "/_control/stats").json["refresh_token_chain"] as? [String: Any]
        let alice = chain?[Self.alice] as? [String: Any]
        #expect(alice?["redeemed"] as? Int == 3)
        #expect(alice?["rejected_superseded"] as? Int == 0)
    }

    @Test("UI-required memory: a repeat after interaction_required makes no STS call and carries a fresh sign_in_url; a new sign-in clears it")
    func uiRequiredMemory() async throws {
        let stack = try await TokenRelayStack(name: "e2e_fid_uimemory")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: ["endpoint": "token", "status": 400, "error": "invalid_grant", "error_codes": [50076], "suberror": "basic_action"])
        let first = try await Self.silent(stack, id, ["Sites.Read.All"])
        #expect(first.status == 409, "\(first.text)")
        let before = try await stack.emulatorCount()
        let second = try await Self.silent(stack, id, ["sites.read.all"])
        #expect(second.status == 409)
        #expect(second.json["suberror"] as? String == "basic_action")
        #expect(second.json["sts_error_codes"] as? [Int] == [50076])
        #expect(try await stack.emulatorCount() == before, "the repeat was answered from the UI-required memory")
        let firstURL = try #require(first.json["sign_in_url"] as? String)
        let secondURL = try #require(second.json["sign_in_url"] as? String)
        #expect(firstURL != secondURL, "each answer mints its own link")
        // Other resources keep working (the refresh token was kept).
        let other = try await Self.silent(stack, id, ["https://management.azure.com/.default"])
        #expect(other.status == 200, "\(other.text)")
        // A new sign-in of the account clears the memory: the STS is asked again (and now agrees).
        _ = try await stack.signInAccountId()
        let after = try await stack.emulatorCount()
        let retried = try await Self.silent(stack, id, ["Sites.Read.All"])
        #expect(retried.status == 200, "\(retried.text)")
        #expect(try await stack.emulatorCount() == after + 1)
    }

    @Test("Claims in an STS error body, as JSON text or base64, come back decoded")
    func stsClaims() async throws {
        let stack = try await TokenRelayStack(name: "e2e_fid_stsclaims")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let claims = #"{"access_token":{"acrs":{"essential":true,"value":"c1"}}}"#
        for (index, encoding) in ["json", "base64", "object"].enumerated() {
            _ = try await stack.control(
                "POST", "/_control/faults",
                json: ["endpoint": "token", "error": "interaction_required", "claims_challenge": claims, "claims_encoding": encoding])
            let refused = try await Self.silent(stack, id, ["Scope\(index).Read"])
            #expect(refused.status == 409, "\(encoding): \(refused.text)")
            #expect(Self.object(refused.json["claims"] as? String) == Self.object(claims), "\(encoding): \(refused.text)")
            #expect(refused.json["account_state"] as? String == "active")
        }
    }

    @Test("POST /v1/tokens/silent with claims bypasses the cache; capability-only claims do not")
    func claimsBypassCache() async throws {
        let stack = try await TokenRelayStack(name: "e2e_fid_bypass", environment: ["TOKENRELAY_CLIENT_CAPABILITIES": "cp1"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let before = try await stack.emulatorCount()
        let capability = try await Self.silent(stack, id, ["User.Read"], extra: ["claims": #"{"access_token":{"xms_cc":{"values":["cp1"]}}}"#])
        #expect(capability.json["source"] as? String == "cache", "\(capability.text)")
        #expect(try await stack.emulatorCount() == before)
        let challenged = try await Self.silent(stack, id, ["User.Read"], extra: ["claims": Self.nbfClaims])
        #expect(challenged.status == 200, "\(challenged.text)")
        #expect(challenged.json["source"] as? String == "refresh")
        #expect(try await stack.emulatorCount() == before + 1)
    }

    @Test("18-graph-401-cae-claims-challenge-unquoted-params: the STS grants the claims and the Graph call recovers invisibly")
    func caeRecovers() async throws {
        let stack = try await TokenRelayStack(name: "e2e_fid_cae_ok", environment: ["TOKENRELAY_CLIENT_CAPABILITIES": "cp1"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        #expect(try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id]).status == 200)
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "graph", "claims_challenge": Self.nbfClaims])
        let tokensBefore = try await stack.emulatorCount()
        let graphBefore = try await stack.emulatorCount("graph_requests")
        let me = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id])
        #expect(me.status == 200, "\(me.text)")
        #expect(me.json["userPrincipalName"] as? String == Self.alice)
        #expect(try await stack.emulatorCount() == tokensBefore + 1, "one acquisition with the claims")
        #expect(try await stack.emulatorCount("graph_requests") == graphBefore + 2, "one retry, no loop")
        // The revoked token is gone: the next call uses the new one without another acquisition.
        #expect(try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id]).status == 200)
        #expect(try await stack.emulatorCount() == tokensBefore + 1)
    }

    @Test("18-graph-401-cae-claims-challenge-unquoted-params: when the STS refuses the claims, 409 with claims, WWW-Authenticate and sign_in_url")
    func caeRefused() async throws {
        let stack = try await TokenRelayStack(name: "e2e_fid_cae_no", environment: ["TOKENRELAY_CLIENT_CAPABILITIES": "cp1"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        #expect(try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id]).status == 200)
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "graph", "claims_challenge": Self.nbfClaims])
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: ["endpoint": "token", "status": 400, "error": "invalid_grant", "error_codes": [50076], "suberror": "basic_action"])
        let me = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id])
        #expect(me.status == 409, "\(me.text)")
        #expect(me.json["error"] as? String == "interaction_required")
        #expect(Self.object(me.json["claims"] as? String) == Self.object(Self.nbfClaims))
        #expect(me.json["suberror"] as? String == "basic_action")
        #expect(me.json["sts_error_codes"] as? [Int] == [50076])
        let challenge = try #require(me.headers["WWW-Authenticate"])
        #expect(challenge.contains(#"error="insufficient_claims""#))
        #expect(challenge.contains("authorization_uri="))
        let signInURL = try #require(me.json["sign_in_url"] as? String)
        #expect(signInURL.contains("claims="))
        // The refused token was evicted: the next call acquires a new one (no claims) and succeeds.
        let before = try await stack.emulatorCount()
        let next = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id])
        #expect(next.status == 200, "\(next.text)")
        #expect(try await stack.emulatorCount() == before + 1)
    }

    @Test("21-graph-429-no-retry-after-exponential-backoff: relayed 429 gets a Retry-After; the refresh token is not touched")
    func graph429() async throws {
        let stack = try await TokenRelayStack(name: "e2e_fid_graph429", environment: ["TOKENRELAY_MAX_ATTEMPTS": "2"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "graph", "status": 429, "count": 2])
        let before = try await stack.emulatorCount()
        let me = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id])
        #expect(me.status == 429, "\(me.text)")
        #expect(me.headers["TokenRelay-Relayed"] == "true")
        #expect(Int(me.headers["Retry-After"] ?? "") ?? 0 >= 1)
        #expect((me.json["error"] as? [String: Any])?["code"] as? String == "TooManyRequests")
        #expect(try await stack.emulatorCount() == before, "no token request because of a 429")
        #expect(try await stack.request("GET", "/v1/accounts/\(id)").json["state"] as? String == "active")
    }

    @Test("sign_in_url: GET without an API key is 302 to the authority; a second use, a tampered or unsigned link are refused")
    func signInURL() async throws {
        let stack = try await TokenRelayStack(name: "e2e_fid_signinurl")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: ["endpoint": "token", "status": 400, "error": "invalid_grant", "error_codes": [50076], "suberror": "basic_action"])
        let refused = try await Self.silent(stack, id, ["Sites.Read.All"])
        let url = try #require(refused.json["sign_in_url"] as? String)
        #expect(url.hasPrefix(stack.baseURL + "/v1/sign-ins/start?"))
        let tampered = try await stack.request("GET", url.replacingOccurrences(of: "Sites.Read.All", with: "Mail.Send"), authenticated: false)
        #expect(tampered.status == 403, "\(tampered.text)")
        #expect(tampered.json["field"] as? String == "sig")
        let first = try await stack.request("GET", url, authenticated: false)
        #expect(first.status == 302, "\(first.text)")
        let location = try #require(first.headers["Location"])
        #expect(location.hasPrefix(stack.emulator.baseURL + "/"))
        #expect(location.contains("/oauth2/v2.0/authorize?"))
        #expect(location.contains("login_hint=alice%40contoso.example"))
        #expect(location.contains("Sites.Read.All"))
        let second = try await stack.request("GET", url, authenticated: false)
        #expect(second.status == 403)
        #expect(second.json["error"] as? String == "forbidden")
        #expect(second.json["field"] as? String == "sig")
        let unsigned = try await stack.request("GET", "/v1/sign-ins/start?scopes=User.Read&expires=9999999999", authenticated: false)
        #expect(unsigned.status == 400)
        #expect(unsigned.json["field"] as? String == "sig")
    }
}
