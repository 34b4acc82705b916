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

    /// The recorded bodies of shared/cases 29, 30 and 33, verbatim (ids replaced there), replayed by the emulator.
    static let case29Body =
        #"{"error":"invalid_grant","error_description":"AADSTS70002: Error validating credentials. AADSTS500133: Assertion is not within its valid time range\r\nTrace ID: 1a1a1a1a-0000-4000-8000-000000000029\r\nCorrelation ID: 2b2b2b2b-0000-4000-8000-000000000029\r\nTimestamp: 2018-10-05 07:30:02Z","error_codes":[70002,500133],"timestamp":"2018-10-05 07:30:02Z","trace_id":"1a1a1a1a-0000-4000-8000-000000000029","correlation_id":"2b2b2b2b-0000-4000-8000-000000000029"}"#
    static let case30Body =
        #"{"error":"invalid_grant","error_description":"AADSTS9002313: Invalid request. Request is malformed or invalid.\r\nTrace ID: 1a1a1a1a-0000-4000-8000-000000000030\r\nCorrelation ID: 2b2b2b2b-0000-4000-8000-000000000030\r\nTimestamp: 2020-10-05 13:08:18Z","error_codes":[9002313],"timestamp":"2020-10-05 13:08:18Z","trace_id":"1a1a1a1a-0000-4000-8000-000000000030","correlation_id":"2b2b2b2b-0000-4000-8000-000000000030","error_uri":"https://login.microsoftonline.com/error?code=9002313"}"#
    static let case33Body =
        #"{"error":"invalid_grant","error_description":"AADSTS7000012: The grant was obtained for a different tenant. Trace ID: 1a1a1a1a-0000-4000-8000-000000000033 Correlation ID: 2b2b2b2b-0000-4000-8000-000000000033 Timestamp: 2026-04-19 07:32:47Z","error_codes":[7000012],"timestamp":"2026-04-19 07:32:47Z","trace_id":"1a1a1a1a-0000-4000-8000-000000000033","correlation_id":"2b2b2b2b-0000-4000-8000-000000000033"}"#

    @Test("29-obo-invalid-grant-two-error-codes: 400 invalid_request on 'assertion', both codes kept, no readiness warning")
    func onBehalfOfTwoCodes() async throws {
        let stack = try await TokenRelayStack(name: "e2e_case29")
        defer { stack.stop() }
        let assertion = try await AppAndOnBehalfOfTests.incomingUserToken(stack)
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "status": 400, "body": Self.case29Body])
        let before = try await stack.emulatorCount()
        let refused = try await stack.request("POST", "/v1/tokens/on-behalf-of", json: ["assertion": assertion, "scopes": ["User.Read"]])
        #expect(refused.status == 400, "\(refused.text)")
        #expect(refused.json["error"] as? String == "invalid_request")
        #expect(refused.json["field"] as? String == "assertion")
        #expect(refused.json["sts_error_codes"] as? [Int] == [70002, 500133])
        #expect(try await stack.emulatorCount() == before + 1, "one STS call, no retry")
        let ready = try await stack.request("GET", "/readyz", authenticated: false)
        #expect(ready.json["status"] as? String == "pass", "the caller's assertion is not the client credential: \(ready.text)")
        // Nothing was cached: the same call succeeds once the platform accepts the assertion.
        let served = try await stack.request("POST", "/v1/tokens/on-behalf-of", json: ["assertion": assertion, "scopes": ["User.Read"]])
        #expect(served.status == 200, "\(served.text)")
    }

    @Test("30-imported-refresh-token-truncated-9002313: invalid_grant 9002313 kills the refresh token; with invalid_request it is our 502")
    func unreadableRefreshToken() async throws {
        let stack = try await TokenRelayStack(name: "e2e_case30", environment: ["TOKENRELAY_MAX_ATTEMPTS": "1"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        // The same code with invalid_request is a malformed request of ours: 502, the account untouched.
        let ours = Self.case30Body.replacingOccurrences(of: #""error":"invalid_grant""#, with: #""error":"invalid_request""#)
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "status": 400, "body": ours])
        let malformed = try await Self.refresh(stack, id)
        #expect(malformed.status == 502, "\(malformed.text)")
        #expect(malformed.json["error"] as? String == "upstream_error")
        #expect(malformed.json["account_state"] as? String == "active")

        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "status": 400, "body": Self.case30Body])
        let before = try await stack.emulatorCount()
        let refused = try await Self.refresh(stack, id)
        #expect(refused.status == 409, "\(refused.text)")
        #expect(refused.json["error"] as? String == "interaction_required")
        #expect(refused.json["account_state"] as? String == "interaction_required")
        #expect(refused.json["sts_error_codes"] as? [Int] == [9002313])
        #expect((refused.json["sign_in_url"] as? String)?.contains("/v1/sign-ins/start?") == true, "\(refused.text)")
        #expect(try await stack.emulatorCount() == before + 1, "one STS call, no retry")
        #expect(try await stack.request("GET", "/v1/accounts/\(id)").json["state"] as? String == "interaction_required")
        // The token was dropped: every scope is refused without asking the platform again.
        let again = try await Self.refresh(stack, id, scopes: ["Mail.Read"])
        #expect(again.status == 409, "\(again.text)")
        #expect(try await stack.emulatorCount() == before + 1)
    }

    @Test("33-aadsts7000012-refresh-token-for-a-different-tenant: 400 invalid_authority on 'authority', the account and its refresh token untouched")
    func grantOfAnotherTenant() async throws {
        let stack = try await TokenRelayStack(name: "e2e_case33")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        // fabrikam: a tenant alice is neither a member nor a guest of.
        let otherTenant = "\(stack.emulator.baseURL)/22222222-2222-2222-2222-222222222222"
        func atOtherTenant() async throws -> TestResponse {
            try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "authority": otherTenant])
        }
        func expectInvalidAuthority(_ refused: TestResponse) {
            #expect(refused.status == 400, "\(refused.text)")
            #expect(refused.json["error"] as? String == "invalid_authority")
            #expect(refused.json["field"] as? String == "authority")
            #expect(refused.json["sts_error_codes"] as? [Int] == [7000012])
            #expect(refused.json["account_state"] as? String == "active")
            #expect(refused.json["sign_in_url"] == nil, "\(refused.text)")
        }
        // The recorded body, then the emulator's own answer to the same redemption.
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "status": 400, "body": Self.case33Body])
        let before = try await stack.emulatorCount()
        expectInvalidAuthority(try await atOtherTenant())
        #expect(try await stack.emulatorCount() == before + 1, "one STS call, no retry")
        expectInvalidAuthority(try await atOtherTenant())

        let account = try await stack.request("GET", "/v1/accounts/\(id)")
        #expect(account.json["state"] as? String == "active", "\(account.text)")
        let events = try await stack.request("GET", "/v1/events")
        #expect(!events.text.contains("interaction_required"), "\(events.text)")
        // The account's own authority is served with the same refresh token, with no memory in the way.
        let served = try await Self.refresh(stack, id)
        #expect(served.status == 200, "\(served.text)")
        #expect(served.json["source"] as? String == "refresh")
    }
}
