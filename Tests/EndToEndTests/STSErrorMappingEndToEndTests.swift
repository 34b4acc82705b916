import Foundation
import Testing
import TokenRelayTesting

/// STS answers injected into the emulator reach the caller as the problems of behaviour §4 and leave
/// the stored refresh token as the case files say.
@Suite("STS errors through the whole stack", .serialized)
struct STSErrorMappingEndToEndTests {
    static func refresh(_ stack: TokenRelayStack, _ id: String, scopes: [String] = ["User.Read"]) async throws -> TestResponse {
        try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": scopes, "force_refresh": true])
    }

    @Test("02-aadsts50076-mfa-required-basic-action-keep-rt: interaction_required for one resource keeps the refresh token")
    func mfaKeepsRefreshToken() async throws {
        let stack = try await TokenRelayStack(name: "e2e_mfa")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: [
                "endpoint": "token", "status": 400, "error": "invalid_grant", "error_codes": [50076], "suberror": "basic_action",
                "error_description": "Due to a configuration change made by your administrator, you must use multi-factor authentication.",
            ])
        let refused = try await Self.refresh(stack, id, scopes: ["Sites.Read.All"])
        #expect(refused.status == 409, "\(refused.text)")
        #expect(refused.json["error"] as? String == "interaction_required")
        #expect(refused.json["suberror"] as? String == "basic_action")
        #expect(refused.json["sts_error_codes"] as? [Int] == [50076])
        #expect(refused.json["account_state"] as? String == "active")
        #expect(refused.json["sts_trace_id"] as? String != nil)
        // The refresh token survived: another resource still refreshes.
        let other = try await Self.refresh(stack, id)
        #expect(other.status == 200, "\(other.text)")
        #expect(other.json["source"] as? String == "refresh")
    }

    @Test("01-aadsts700082-refresh-token-inactive-bad-token: a dead refresh token is deleted and never sent again")
    func inactiveRefreshToken() async throws {
        let stack = try await TokenRelayStack(name: "e2e_700082")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: [
                "endpoint": "token", "status": 400, "error": "invalid_grant", "error_codes": [700082], "suberror": "bad_token",
                "error_description": "The refresh token has expired due to inactivity.",
            ])
        let refused = try await Self.refresh(stack, id)
        #expect(refused.status == 409)
        #expect(refused.json["suberror"] as? String == "bad_token")
        #expect(refused.json["account_state"] as? String == "interaction_required")
        let before = try await stack.emulatorCount("token_requests")
        let again = try await Self.refresh(stack, id)
        #expect(again.status == 409)
        #expect(try await stack.emulatorCount("token_requests") == before)
    }

    @Test("09-aadsts7000215-invalid-client-secret-401: a rejected client credential is 502 and touches no account")
    func invalidClientSecret() async throws {
        let stack = try await TokenRelayStack(name: "e2e_7000215")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: [
                "endpoint": "token", "status": 401, "error": "invalid_client", "error_codes": [7000215],
                "error_description": "Invalid client secret provided.",
            ])
        let refused = try await Self.refresh(stack, id)
        #expect(refused.status == 502, "\(refused.text)")
        #expect(refused.json["error"] as? String == "upstream_error")
        #expect(refused.json["sts_error_codes"] as? [Int] == [7000215])
        let account = try await stack.request("GET", "/v1/accounts/\(id)")
        #expect(account.json["state"] as? String == "active")
        #expect(try await Self.refresh(stack, id).status == 200)
    }

    @Test("10-sts-429-plain-text-body-retry-after: a plain-text 429 beyond the wait budget is 429 throttled with Retry-After")
    func throttledPlainText() async throws {
        let stack = try await TokenRelayStack(name: "e2e_429", environment: ["TOKENRELAY_MAX_RETRY_AFTER_S": "5"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "status": 429, "retry_after": "60", "body": "Too Many Requests"])
        let refused = try await Self.refresh(stack, id)
        #expect(refused.status == 429, "\(refused.text)")
        #expect(refused.json["error"] as? String == "throttled")
        let retryAfter = Int(refused.headers["Retry-After"] ?? "") ?? 0
        #expect(retryAfter >= 59 && retryAfter <= 60)
        #expect(refused.json["retry_after_s"] as? Int == retryAfter)
        let account = try await stack.request("GET", "/v1/accounts/\(id)")
        #expect(account.json["state"] as? String == "active")
    }

    @Test("11-sts-503-temporarily-unavailable-90033: one transient 503 is retried and the caller gets a token")
    func transientRetriedOnce() async throws {
        let stack = try await TokenRelayStack(name: "e2e_503")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: [
                "endpoint": "token", "status": 503, "error": "temporarily_unavailable", "error_codes": [90033],
                "error_description": "A transient error has occurred. Please try again.", "retry_after": "1",
            ])
        let before = try await stack.emulatorCount("token_requests")
        let served = try await Self.refresh(stack, id)
        #expect(served.status == 200, "\(served.text)")
        #expect(try await stack.emulatorCount("token_requests") == before + 2)

        // Twice in a row: the STS is retried once only, then 503 upstream_unavailable with Retry-After.
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: [
                "endpoint": "token", "status": 503, "error": "temporarily_unavailable", "error_codes": [90033], "count": 3,
                "error_description": "A transient error has occurred.",
            ])
        let unavailable = try await Self.refresh(stack, id)
        #expect(unavailable.status == 503, "\(unavailable.text)")
        #expect(unavailable.json["error"] as? String == "upstream_unavailable")
        #expect(unavailable.headers["Retry-After"] != nil)
        #expect(try await stack.request("GET", "/v1/accounts/\(id)").json["state"] as? String == "active")
    }

    @Test("16-declined-scopes-narrower-grant: fewer scopes than asked is 409 server_declined_scopes, or 200 with allow_partial")
    func declinedScopes() async throws {
        let stack = try await TokenRelayStack(name: "e2e_declined")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control("POST", "/_control/users/alice@contoso.example", json: ["declined_scopes": ["User.ReadBasic.All"]])
        let refused = try await Self.refresh(stack, id, scopes: ["User.ReadBasic.All", "Files.ReadWrite"])
        #expect(refused.status == 409, "\(refused.text)")
        #expect(refused.json["error"] as? String == "server_declined_scopes")
        #expect(refused.json["declined_scopes"] as? [String] == ["User.ReadBasic.All"])
        #expect(refused.json["granted_scopes"] as? [String] == ["Files.ReadWrite"])
        let partial = try await stack.request(
            "POST", "/v1/tokens/silent",
            json: [
                "account_id": id, "scopes": ["User.ReadBasic.All", "Files.ReadWrite"], "allow_partial": true, "force_refresh": true,
            ])
        #expect(partial.status == 200, "\(partial.text)")
        #expect(partial.json["declined_scopes"] as? [String] == ["User.ReadBasic.All"])
        #expect(partial.json["scopes"] as? [String] == ["Files.ReadWrite"])

        // Repeats are answered from the declined-scopes memory: same answers, no STS call.
        let before = try await stack.emulatorCount()
        let repeated = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["Files.ReadWrite", "User.ReadBasic.All"]])
        #expect(repeated.status == 409)
        #expect(repeated.json["declined_scopes"] as? [String] == ["User.ReadBasic.All"])
        let repeatedPartial = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.ReadBasic.All", "Files.ReadWrite"], "allow_partial": true])
        #expect(repeatedPartial.status == 200)
        #expect(repeatedPartial.json["source"] as? String == "cache")
        #expect(repeatedPartial.json["declined_scopes"] as? [String] == ["User.ReadBasic.All"])
        #expect(repeatedPartial.json["access_token"] as? String == partial.json["access_token"] as? String)
        #expect(try await stack.emulatorCount() == before)
    }

    @Test("14-token-response-without-refresh-token: a response without refresh_token keeps the stored one")
    func responseWithoutRefreshToken() async throws {
        let stack = try await TokenRelayStack(name: "e2e_no_rt")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control("POST", "/_control/users/alice@contoso.example", json: ["omit_refresh_token": true])
        #expect(try await Self.refresh(stack, id).status == 200)
        _ = try await stack.control("POST", "/_control/users/alice@contoso.example", json: ["omit_refresh_token": false])
        let again = try await Self.refresh(stack, id)
        #expect(again.status == 200, "the stored refresh token was lost: \(again.text)")
    }
}
