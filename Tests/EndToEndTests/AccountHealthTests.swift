import Foundation
import Testing
import TokenRelayTesting

/// Account health (behaviour §3.8): every account shows when it last refreshed and was used, its
/// last failure with the STS-error table's class, when an idle refresh token would die and when
/// keep-alive redeems it; `GET /v1/accounts` filters by state and failure class; the
/// `tokenrelay_accounts` gauge counts them, refreshed periodically.
@Suite("Account health: last failure and its class, filters, the gauge", .serialized)
struct AccountHealthTests {
    /// The platform's answers of shared/cases 01, 09, 11 and, for an administrator's block, the
    /// shape of case 02 with AADSTS53003 (no recorded case has one), as emulator faults.
    enum Answer {
        /// cases/11-sts-503-temporarily-unavailable-90033 (twice: the one retry fails too).
        static var transient: [String: Any] {
            [
                "endpoint": "token", "status": 503, "error": "temporarily_unavailable", "error_codes": [90033], "count": 2,
                "error_description": "A transient error has occurred. Please try again.",
            ]
        }
        /// cases/01-aadsts700082-refresh-token-inactive-bad-token.
        static var userAction: [String: Any] {
            [
                "endpoint": "token", "status": 400, "error": "invalid_grant", "error_codes": [700082], "suberror": "bad_token",
                "error_description": "The refresh token has expired due to inactivity.",
            ]
        }
        /// Case 02's shape, AADSTS53003 "Access has been blocked by Conditional Access policies" (suberror message_only).
        static var adminAction: [String: Any] {
            [
                "endpoint": "token", "status": 400, "error": "invalid_grant", "error_codes": [53003], "suberror": "message_only",
                "error_description": "Access has been blocked by Conditional Access policies. The access policy does not allow token issuance.",
            ]
        }
        /// cases/09-aadsts7000215-invalid-client-secret-401.
        static var configuration: [String: Any] {
            [
                "endpoint": "token", "status": 401, "error": "invalid_client", "error_codes": [7000215],
                "error_description": "Invalid client secret provided.",
            ]
        }
    }

    static func refresh(_ stack: TokenRelayStack, _ id: String) async throws -> TestResponse {
        try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
    }

    static func health(_ stack: TokenRelayStack, _ id: String) async throws -> [String: Any] {
        try await stack.request("GET", "/v1/accounts/\(id)").json["health"] as? [String: Any] ?? [:]
    }

    /// The account's last failure once its (background) write has landed.
    static func lastFailure(_ stack: TokenRelayStack, _ id: String) async throws -> [String: Any] {
        var failure: [String: Any] = [:]
        _ = try await eventually(within: 5) {
            failure = try await health(stack, id)["last_failure"] as? [String: Any] ?? [:]
            return !failure.isEmpty
        }
        return failure
    }

    static func date(_ text: Any?) -> Date? { (text as? String).flatMap { try? Date($0, strategy: .iso8601) } }

    @Test("A healthy account: last refresh, idle expiry 90 days after it, next keep-alive after TOKENRELAY_KEEPALIVE_AFTER_DAYS, no failure")
    func healthyAccount() async throws {
        let stack = try await TokenRelayStack(name: "e2e_health_ok", environment: ["TOKENRELAY_KEEPALIVE_AFTER_DAYS": "30"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let health = try await Self.health(stack, id)
        let refreshed = try #require(Self.date(health["last_refresh_at"]), "\(health)")
        #expect(abs(refreshed.timeIntervalSinceNow) < 120)
        #expect(Self.date(health["refresh_token_idle_expires_at"]) == refreshed.addingTimeInterval(90 * 86400), "\(health)")
        #expect(Self.date(health["next_keepalive_at"]) == refreshed.addingTimeInterval(30 * 86400), "\(health)")
        #expect(health["last_failure"] is NSNull, "\(health)")
        #expect(health.keys.contains("last_used_at"))
        // The list shows the same object.
        let listed = try await stack.request("GET", "/v1/accounts").json["accounts"] as? [[String: Any]] ?? []
        #expect((listed.first?["health"] as? [String: Any])?["last_refresh_at"] as? String == health["last_refresh_at"] as? String)
    }

    @Test(
        "Each class of the table from the platform's answers: transient, user_action, admin_action, configuration",
        arguments: ["transient", "user_action", "admin_action", "configuration"])
    func failureClass(_ expected: String) async throws {
        let stack = try await TokenRelayStack(name: "e2e_health_\(expected)")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let fault =
            switch expected {
            case "transient": Answer.transient
            case "user_action": Answer.userAction
            case "admin_action": Answer.adminAction
            default: Answer.configuration
            }
        _ = try await stack.control("POST", "/_control/faults", json: fault)
        let refused = try await Self.refresh(stack, id)
        #expect(refused.status >= 400, "\(refused.text)")
        let failure = try await Self.lastFailure(stack, id)
        #expect(failure["class"] as? String == expected, "\(failure)")
        #expect(failure["error"] as? String == fault["error"] as? String)
        #expect(failure["sts_error_codes"] as? [Int] == fault["error_codes"] as? [Int])
        #expect(failure["suberror"] as? String == fault["suberror"] as? String)
        #expect(failure["current"] as? Bool == true)
        #expect(Self.date(failure["at"]) != nil)
        let account = try await stack.request("GET", "/v1/accounts/\(id)").json
        #expect(account["state"] as? String == (expected == "user_action" ? "interaction_required" : "active"), "\(account)")
    }

    @Test("GET /v1/accounts filters by state and by the class of the current failure; bad values are 400 naming the field; the gauge counts them")
    func filtersAndGauge() async throws {
        let stack = try await TokenRelayStack(name: "e2e_health_filters", environment: ["TOKENRELAY_ACCOUNT_HEALTH_INTERVAL_S": "1"])
        defer { stack.stop() }
        let alice = try await stack.signInAccountId("alice@contoso.example")
        let bob = try await stack.signInAccountId("bob@contoso.example")
        let erin = try await stack.signInAccountId("erin@contoso.example")
        for (id, username, fault) in [
            (alice, "alice@contoso.example", Answer.userAction), (bob, "bob@contoso.example", Answer.transient),
            (erin, "erin@contoso.example", Answer.configuration),
        ] {
            var targeted = fault
            targeted["username"] = username
            _ = try await stack.control("POST", "/_control/faults", json: targeted)
            _ = try await Self.refresh(stack, id)
            _ = try await Self.lastFailure(stack, id)
        }
        func listed(_ query: String) async throws -> [String] {
            let page = try await stack.request("GET", "/v1/accounts?\(query)")
            #expect(page.status == 200, "\(query): \(page.text)")
            return (page.json["accounts"] as? [[String: Any]] ?? []).compactMap { $0["account_id"] as? String }.sorted()
        }
        #expect(try await listed("state=interaction_required") == [alice])
        #expect(try await listed("state=active") == [bob, erin].sorted())
        #expect(try await listed("failure_class=transient") == [bob])
        #expect(try await listed("failure_class=configuration&state=active") == [erin])
        #expect(try await listed("failure_class=user_action&state=active") == [])
        #expect(try await listed("failure_class=admin_action") == [])
        let refusedQueries = [
            ("state=dead", "state"), ("failure_class=bogus", "failure_class"), ("failure_class=Transient", "failure_class"), ("state=", "state"),
            ("failure_class=", "failure_class"),
        ]
        for (query, field) in refusedQueries {
            let refused = try await stack.request("GET", "/v1/accounts?\(query)")
            #expect(refused.status == 400, "\(query): \(refused.text)")
            #expect(refused.json["error"] as? String == "invalid_request")
            #expect(refused.json["field"] as? String == field, "\(query): \(refused.text)")
        }

        // A refresh that works again makes bob's failure history: shown, no longer current.
        #expect(try await Self.refresh(stack, bob).status == 200)
        #expect(try await listed("failure_class=transient") == [])
        let history = try await Self.health(stack, bob)["last_failure"] as? [String: Any] ?? [:]
        #expect(history["class"] as? String == "transient")
        #expect(history["current"] as? Bool == false)

        // The gauge, from the periodic count: alice dead (user_action), erin configuration, bob none.
        func gauge(_ state: String, _ failureClass: String) async throws -> Double? {
            let metrics = try await stack.request("GET", "/metrics", authenticated: false).text
            let series = "tokenrelay_accounts{failure_class=\"\(failureClass)\",state=\"\(state)\"} "
            return metrics.split(separator: "\n").first { $0.hasPrefix(series) }.flatMap { Double($0.dropFirst(series.count)) }
        }
        let counted = try await eventually(within: 10) {
            let dead = try await gauge("interaction_required", "user_action")
            let configuration = try await gauge("active", "configuration")
            let healthy = try await gauge("active", "none")
            let transient = try await gauge("active", "transient")
            return dead == 1 && configuration == 1 && healthy == 1 && transient == 0
        }
        let exposition = try await stack.request("GET", "/metrics", authenticated: false).text
        #expect(counted, "\(exposition.split(separator: "\n").filter { $0.contains("tokenrelay_accounts") })")
        let adminAction = try await gauge("active", "admin_action")
        #expect(adminAction == 0, "every pair is exposed, 0 when no account has it")
    }
}
