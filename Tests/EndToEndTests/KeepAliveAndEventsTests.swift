import CryptoBridge
import Foundation
import HTTPCommon
import HTTPServerBridge
import PostgresBridge
import Synchronization
import Testing
import TokenRelayTesting

/// Refresh-token keep-alive (`token-relay keepalive --once`), account events (`GET /v1/events`)
/// and their webhook, on the whole stack. Time is never waited for: rows are aged in the database.
@Suite("Keep-alive, account events and webhooks, end to end", .serialized)
struct KeepAliveAndEventsTests {
    /// Runs the built `token-relay`; returns (exit status, standard output, standard error).
    static func tokenRelay(_ arguments: [String], environment: [String: String]) async throws -> (status: Int32, output: String, error: String) {
        let run = try await BuiltProducts.run("token-relay", arguments, environment: environment)
        return (run.status, run.output, run.error)
    }

    /// `keepalive --once` with the stack's settings; returns its summary.
    static func keepAlivePass(_ stack: TokenRelayStack, _ extra: [String: String] = [:]) async throws -> [String: Any] {
        let run = try await tokenRelay(["keepalive", "--once"], environment: stack.environment.merging(extra) { $1 })
        #expect(run.status == 0, "\(run.error)")
        return (try? JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any]) ?? [:]
    }

    static func refreshGrants(_ stack: TokenRelayStack) async throws -> Int {
        let stats = try await stack.control("GET", "/_control/stats").json
        return (stats["token_requests_by_grant"] as? [String: Any])?["refresh_token"] as? Int ?? 0
    }

    static func generation(_ stack: TokenRelayStack, _ accountId: String) async throws -> Int64? {
        try await stack.withDatabase { connection in
            try connection.query("SELECT generation FROM refresh_tokens WHERE account_id = $1", [.text(accountId)]).rows.first?.int("generation")
        }
    }

    /// Makes the account's refresh token look last redeemed `days` days ago.
    static func age(_ stack: TokenRelayStack, _ accountId: String, days: Int) async throws {
        _ = try await stack.withDatabase { connection in
            try connection.query(
                "UPDATE refresh_tokens SET updated_at = now() - make_interval(days => $2::int) WHERE account_id = $1", [.text(accountId), .int(Int64(days))])
        }
    }

    static func events(_ stack: TokenRelayStack, _ query: String = "") async throws -> [[String: Any]] {
        let page = try await stack.request("GET", "/v1/events\(query)")
        #expect(page.status == 200, "\(page.text)")
        return page.json["events"] as? [[String: Any]] ?? []
    }

    /// The events of the account's state (every sign-in also writes `account.signed_in`, behaviour §3.9).
    static func stateEvents(_ stack: TokenRelayStack) async throws -> [[String: Any]] {
        try await events(stack).filter { $0["type"] as? String != "account.signed_in" }
    }

    @Test("keepalive --once refreshes an idle account through the normal refresh path and leaves a recently refreshed one alone")
    func keepAliveRefreshesIdleAccounts() async throws {
        let stack = try await TokenRelayStack(name: "e2e_keepalive")
        defer { stack.stop() }
        let idle = try await stack.signInAccountId("alice@contoso.example")
        let recent = try await stack.signInAccountId("bob@contoso.example")
        try await Self.age(stack, idle, days: 61)
        let idleBefore = try #require(try await Self.generation(stack, idle))
        let recentBefore = try #require(try await Self.generation(stack, recent))
        let grantsBefore = try await Self.refreshGrants(stack)

        // 61 days is not idle enough for a 62-day setting.
        let notYet = try await Self.keepAlivePass(stack, ["TOKENRELAY_KEEPALIVE_AFTER_DAYS": "62"])
        #expect(notYet["ran"] as? Bool == true)
        #expect(notYet["refreshed"] as? Int == 0)
        #expect(try await Self.refreshGrants(stack) == grantsBefore)

        // Another replica holds the lease: this one runs nothing.
        _ = try await stack.withDatabase { connection in
            try connection.query("INSERT INTO job_leases (job, holder, expires_at) VALUES ('keepalive', 'other-replica', now() + interval '1 minute')")
        }
        #expect(try await Self.keepAlivePass(stack)["ran"] as? Bool == false)
        #expect(try await Self.refreshGrants(stack) == grantsBefore)
        _ = try await stack.withDatabase { connection in try connection.query("DELETE FROM job_leases") }

        let pass = try await Self.keepAlivePass(stack)
        #expect(pass["ran"] as? Bool == true)
        #expect(pass["refreshed"] as? Int == 1)
        #expect(pass["failed"] as? Int == 0)
        #expect(try await Self.refreshGrants(stack) == grantsBefore + 1)
        #expect(try await Self.generation(stack, idle) == idleBefore + 1)
        #expect(try await Self.generation(stack, recent) == recentBefore)
        // A keep-alive is not a use of the account.
        let lastUsed = try await stack.request("GET", "/v1/accounts/\(idle)").json["last_used_at"]
        #expect(lastUsed is NSNull)
        // The lease was released.
        let leases = try await stack.withDatabase { connection in try connection.query("SELECT job FROM job_leases").rows.count }
        #expect(leases == 0)
        // The rotated refresh token works, and the account is no longer idle.
        let token = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": idle, "scopes": ["User.Read"], "force_refresh": true])
        #expect(token.status == 200, "\(token.text)")
        #expect(try await Self.keepAlivePass(stack)["refreshed"] as? Int == 0)

        // An idle account without a cached access token is refreshed with `openid profile offline_access`.
        _ = try await stack.withDatabase { connection in
            try connection.query("DELETE FROM access_tokens WHERE account_id = $1", [.text(recent)])
        }
        try await Self.age(stack, recent, days: 75)
        #expect(try await Self.keepAlivePass(stack)["refreshed"] as? Int == 1)
        #expect(try await Self.generation(stack, recent) == recentBefore + 1)
        #expect(try await Self.stateEvents(stack).isEmpty)
    }

    @Test("A keep-alive refused with AADSTS700082 marks the account interaction_required; events page in order with a cursor")
    func keepAliveFailureAndEventPaging() async throws {
        let stack = try await TokenRelayStack(name: "e2e_keepalive_fail")
        defer { stack.stop() }
        let id = try await stack.signInAccountId("alice@contoso.example")
        try await Self.age(stack, id, days: 61)
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: [
                "endpoint": "token", "status": 400, "error": "invalid_grant", "error_codes": [700082], "suberror": "bad_token",
                "error_description": "The refresh token has expired due to inactivity.",
            ])
        let pass = try await Self.keepAlivePass(stack)
        #expect(pass["failed"] as? Int == 1)
        #expect(pass["refreshed"] as? Int == 0)
        #expect(try await stack.request("GET", "/v1/accounts/\(id)").json["state"] as? String == "interaction_required")
        #expect(try await Self.generation(stack, id) == nil)
        // An account waiting for its user is not tried again.
        let again = try await Self.keepAlivePass(stack)
        #expect(again["refreshed"] as? Int == 0 && again["failed"] as? Int == 0)

        // The user signs in again (recovered), then is signed out (deleted).
        #expect(try await stack.signInAccountId("alice@contoso.example") == id)
        #expect(try await stack.request("DELETE", "/v1/accounts/\(id)").status == 204)

        let all = try await Self.events(stack)
        #expect(
            all.map { $0["type"] as? String }
                == [
                    "account.signed_in", "account.interaction_required", "account.keepalive_failed", "account.recovered", "account.signed_in",
                    "account.deleted",
                ])
        #expect(all.allSatisfy { $0["account_id"] as? String == id })
        #expect(Set(all.compactMap { $0["id"] as? String }).count == 6)
        #expect((all[0]["data"] as? [String: Any])?["created"] as? Bool == true)
        #expect((all[4]["data"] as? [String: Any])?["created"] as? Bool == false)
        #expect(all.allSatisfy { ($0["occurred_at"] as? String)?.hasSuffix("Z") == true })
        let failed = try #require(all[2]["data"] as? [String: Any])
        #expect(failed["error"] as? String == "interaction_required")
        #expect(failed["account_state"] as? String == "interaction_required")
        #expect(failed["sts_error_codes"] as? [Int] == [700082])
        #expect((all[1]["data"] as? [String: Any])?["sts_error_codes"] as? [Int] == [700082])

        // Paging: three and three, then an empty page that keeps the cursor for the next poll.
        let first = try await stack.request("GET", "/v1/events?limit=3")
        let cursor = try #require(first.json["next_cursor"] as? String)
        let second = try await stack.request("GET", "/v1/events?limit=3&cursor=\(cursor)")
        let cursor2 = try #require(second.json["next_cursor"] as? String)
        let paged = [first, second].flatMap { ($0.json["events"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String } }
        #expect(paged == all.compactMap { $0["id"] as? String })
        let empty = try await stack.request("GET", "/v1/events?cursor=\(cursor2)")
        #expect((empty.json["events"] as? [Any])?.isEmpty == true)
        #expect(empty.json["next_cursor"] as? String == cursor2)
        #expect(try await stack.request("GET", "/v1/events?cursor=bogus").status == 400)
        #expect(try await stack.request("GET", "/v1/events?limit=0").status == 400)
        #expect(try await stack.request("GET", "/v1/events?since=1").status == 400)
        #expect(try await stack.request("GET", "/v1/events", authenticated: false).status == 401)
    }

    @Test("A webhook receiver that is down (refusing, then 503) gets every event after it comes back, in order, signed, with stable ids")
    func webhookDeliveryAfterOutage() async throws {
        let secret = "whsec-test-" + UUID().uuidString
        let receiver = WebhookReceiver()
        // Bind a port, then close it: the receiver starts "refusing connections".
        let probe = HTTPServer(configuration: HTTPServerConfiguration(host: "127.0.0.1", port: 0, threadCount: 1), handler: receiver)
        try probe.start()
        let port = probe.port
        probe.stop()

        let stack = try await TokenRelayStack(
            name: "e2e_webhook",
            environment: [
                "TOKENRELAY_WEBHOOK_URL": "http://127.0.0.1:\(port)/hooks/tokenrelay", "TOKENRELAY_WEBHOOK_SECRET": secret,
                "TOKENRELAY_WEBHOOK_MAX_BACKOFF_S": "1",
            ])
        defer { stack.stop() }

        // Seven events: signed_in, interaction_required, recovered, signed_in, deleted (alice),
        // signed_in, deleted (bob).
        let alice = try await stack.signInAccountId("alice@contoso.example")
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: ["endpoint": "token", "status": 400, "error": "invalid_grant", "error_codes": [700082], "error_description": "Inactive."])
        let dead = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": alice, "scopes": ["User.Read"], "force_refresh": true])
        #expect(dead.status == 409)
        #expect(try await stack.signInAccountId("alice@contoso.example") == alice)
        #expect(try await stack.request("DELETE", "/v1/accounts/\(alice)").status == 204)
        let bob = try await stack.signInAccountId("bob@contoso.example")
        #expect(try await stack.request("DELETE", "/v1/accounts/\(bob)").status == 204)
        let expected = try await Self.events(stack)
        #expect(expected.count == 7)

        // Refused connections are counted as unreachable deliveries, and retried.
        let refusedTwice = try await eventually(within: 20) {
            let metrics = try await stack.request("GET", "/metrics", authenticated: false).text
            return metrics.split(separator: "\n").contains { line in
                line.hasPrefix("tokenrelay_webhook_deliveries_total{outcome=\"unreachable\"}") && (Double(line.split(separator: " ").last ?? "") ?? 0) >= 2
            }
        }
        #expect(refusedTwice)

        // Up, but answering 503: still retried, and nothing is marked delivered.
        let server = HTTPServer(configuration: HTTPServerConfiguration(host: "127.0.0.1", port: port, threadCount: 1), handler: receiver)
        try server.start()
        defer { server.stop() }
        #expect(try await eventually(within: 20) { receiver.requests.count >= 3 })
        #expect(receiver.requests.allSatisfy { $0.status == 503 })
        let undelivered = try await stack.withDatabase { connection in
            try connection.query("SELECT count(*) AS n FROM account_events WHERE delivered_at IS NULL").rows.first?.int("n")
        }
        #expect(undelivered == 7)

        receiver.setUp(true)
        #expect(try await eventually(within: 30) { receiver.accepted.count >= 7 })
        let accepted = receiver.accepted
        #expect(accepted.count == 7, "each event is acknowledged once")
        let expectedIds = expected.compactMap { $0["id"] as? String }
        #expect(accepted.map(\.eventId) == expectedIds)
        // Every attempt, refused or not, carried the id of the oldest undelivered event first: ids are stable.
        #expect(Set(receiver.requests.filter { $0.status == 503 }.map(\.eventId)) == [expectedIds[0]])
        for delivery in accepted {
            #expect(delivery.path == "/hooks/tokenrelay")
            #expect(delivery.contentType == "application/json")
            let body = try #require(try JSONSerialization.jsonObject(with: Data(delivery.body)) as? [String: Any])
            #expect(body["id"] as? String == delivery.eventId)
            #expect(Set(body.keys) == ["id", "type", "occurred_at", "account_id", "tenant_id", "data"])
            // The account's tenant (behaviour §12.33).
            #expect(body["tenant_id"] as? String == stack.tenantId, "\(body)")
            let parts = Dictionary(
                uniqueKeysWithValues: delivery.signature.split(separator: ",").compactMap { part -> (String, String)? in
                    let pair = part.split(separator: "=", maxSplits: 1)
                    return pair.count == 2 ? (String(pair[0]), String(pair[1])) : nil
                })
            let timestamp = try #require(parts["t"].flatMap { Int($0) })
            #expect(abs(timestamp - Int(Date().timeIntervalSince1970)) < 120)
            let mac = HMACSHA256.authenticationCode(for: Array("\(timestamp).".utf8) + delivery.body, key: Array(secret.utf8))
            #expect(parts["v1"] == mac.map { String(format: "%02x", $0) }.joined(), "valid signature")
            let forged = HMACSHA256.authenticationCode(for: Array("\(timestamp).".utf8) + delivery.body, key: Array("wrong".utf8))
            #expect(parts["v1"] != forged.map { String(format: "%02x", $0) }.joined())
        }
        #expect(
            accepted.map { (try? JSONSerialization.jsonObject(with: Data($0.body)) as? [String: Any])?["type"] as? String }
                == expected.map { $0["type"] as? String })
        let delivered = try await stack.withDatabase { connection in
            try connection.query("SELECT count(*) AS n FROM account_events WHERE delivered_at IS NOT NULL").rows.first?.int("n")
        }
        #expect(delivered == 7)
        // The secret never reaches the log.
        #expect(!stack.relay.log().contains(secret))
    }

    @Test(
        "Every completed sign-in is pushed to the webhook as account.signed_in (created true, then false; its sign_in_id and tenant), a refused one as sign_in.failed"
    )
    func signInsReachTheWebhook() async throws {
        let receiver = WebhookReceiver()
        receiver.setUp(true)
        let server = HTTPServer(configuration: HTTPServerConfiguration(host: "127.0.0.1", port: 0, threadCount: 1), handler: receiver)
        try server.start()
        defer { server.stop() }
        let stack = try await TokenRelayStack(
            name: "e2e_webhook_signed_in",
            environment: ["TOKENRELAY_WEBHOOK_URL": "http://127.0.0.1:\(server.port)/hooks", "TOKENRELAY_WEBHOOK_SECRET": "whsec-signed-in"])
        defer { stack.stop() }
        var signInIds: [String] = []
        for _ in 0..<2 {
            let started = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": "alice@contoso.example"])
            signInIds.append(try #require(started.json["sign_in_id"] as? String))
            let location = try await stack.authorize(try #require(started.json["authorize_url"] as? String), as: "alice@contoso.example")
            #expect(try await stack.request("GET", location, authenticated: false).status == 200)
        }
        let accountId = try #require(try await stack.request("GET", "/v1/accounts").json["accounts"] as? [[String: Any]]).first?["account_id"] as? String
        // Bound to alice, completed by bob: refused.
        let bound = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "account_id": try #require(accountId)])
        let refusedId = try #require(bound.json["sign_in_id"] as? String)
        let location = try await stack.authorize(try #require(bound.json["authorize_url"] as? String), as: "bob@contoso.example")
        #expect(try await stack.request("GET", location, authenticated: false).status == 409)

        #expect(try await eventually(within: 15) { receiver.accepted.count >= 3 })
        let bodies = receiver.accepted.compactMap { try? JSONSerialization.jsonObject(with: Data($0.body)) as? [String: Any] }
        #expect(bodies.map { $0["type"] as? String } == ["account.signed_in", "account.signed_in", "sign_in.failed"])
        for (index, body) in bodies.prefix(2).enumerated() {
            let data = try #require(body["data"] as? [String: Any])
            #expect(body["account_id"] as? String == accountId)
            #expect(data["created"] as? Bool == (index == 0), "\(data)")
            #expect(data["sign_in_id"] as? String == signInIds[index])
            #expect(data["tenant_id"] as? String == stack.tenantId)
        }
        let failed = try #require(bodies.last?["data"] as? [String: Any])
        #expect(bodies.last?["account_id"] as? String == accountId, "the account the sign-in was for")
        #expect(failed["sign_in_id"] as? String == refusedId)
        #expect(failed["error"] as? String == "user_mismatch")
    }

    @Test("While the webhook receiver is slow to answer, the relay holds no transaction or advisory lock, and events still arrive in order")
    func slowReceiverHoldsNothingOfPostgres() async throws {
        let receiver = WebhookReceiver()
        receiver.setUp(true)
        receiver.setDelay(4)
        let server = HTTPServer(configuration: HTTPServerConfiguration(host: "127.0.0.1", port: 0, threadCount: 1), handler: receiver)
        try server.start()
        defer { server.stop() }
        let stack = try await TokenRelayStack(
            name: "e2e_webhook_slow",
            environment: ["TOKENRELAY_WEBHOOK_URL": "http://127.0.0.1:\(server.port)/hooks", "TOKENRELAY_WEBHOOK_SECRET": "whsec-slow-receiver"])
        defer { stack.stop() }
        for username in ["alice@contoso.example", "bob@contoso.example"] {
            let accountId = try await stack.signInAccountId(username)
            #expect(try await stack.request("DELETE", "/v1/accounts/\(accountId)").status == 204)
        }
        let expectedIds = try await Self.events(stack).compactMap { $0["id"] as? String }
        #expect(expectedIds.count == 4)

        #expect(try await eventually(within: 10) { receiver.inFlight > 0 })
        let (inTransaction, advisoryLocks) = try await stack.withDatabase { connection in
            let sessions = try connection.query(
                """
                SELECT count(*) AS n FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'
                """
            ).rows.first?.int("n")
            let locks = try connection.query(
                """
                SELECT count(*) AS n FROM pg_locks
                WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                """
            ).rows.first?.int("n")
            return (sessions, locks)
        }
        #expect(receiver.inFlight > 0, "a delivery was in flight while the database was looked at")
        #expect(inTransaction == 0, "no relay session idles in a transaction while the receiver answers")
        #expect(advisoryLocks == 0, "no advisory lock is held while the receiver answers")

        #expect(try await eventually(within: 30) { receiver.accepted.count >= 4 })
        #expect(receiver.accepted.map(\.eventId) == expectedIds)
        #expect(receiver.maxInFlight == 1, "one delivery at a time")
    }
}
