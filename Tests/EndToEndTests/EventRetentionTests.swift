import Foundation
import HTTPServerBridge
import PostgresBridge
import Testing
import TokenRelayTesting

/// Event retention (`TOKENRELAY_EVENTS_RETENTION_DAYS`, behaviour §11) and where webhook delivery
/// begins (issue 10 item 12), on the whole stack. No waiting for days: events are aged in the
/// database (`occurred_at`), and `token-relay keepalive --once` runs the pass that prunes.
@Suite("Event retention and the start of webhook delivery, end to end", .serialized)
struct EventRetentionTests {
    /// Signs `usernames` in and deletes each account: two events each, `account.signed_in` and
    /// `account.deleted`.
    /// - Returns: the event ids, oldest first.
    static func deletionEvents(_ stack: TokenRelayStack, _ usernames: [String]) async throws -> [String] {
        for username in usernames {
            let accountId = try await stack.signInAccountId(username)
            #expect(try await stack.request("DELETE", "/v1/accounts/\(accountId)").status == 204)
        }
        let ids = try await KeepAliveAndEventsTests.events(stack, "?limit=200").compactMap { $0["id"] as? String }
        return Array(ids.suffix(usernames.count * 2))
    }

    /// Makes the events `ids` look `days` days old.
    static func age(_ stack: TokenRelayStack, _ ids: [String], days: Int) async throws {
        let literal = "{" + ids.joined(separator: ",") + "}"
        _ = try await stack.withDatabase { connection in
            try connection.query(
                "UPDATE account_events SET occurred_at = now() - make_interval(days => $2::int) WHERE event_id = ANY($1::text[])",
                [.text(literal), .int(Int64(days))])
        }
    }

    /// The ids of every event stored, oldest first.
    static func storedIds(_ stack: TokenRelayStack) async throws -> [String] {
        try await stack.withDatabase { connection in
            try connection.query("SELECT event_id FROM account_events ORDER BY seq").rows.compactMap { $0.string("event_id") }
        }
    }

    @Test("keepalive --once prunes events past TOKENRELAY_EVENTS_RETENTION_DAYS in batches; fresh ones stay")
    func agedEventsArePruned() async throws {
        let stack = try await TokenRelayStack(name: "e2e_events_retention")
        defer { stack.stop() }
        let ids = try await Self.deletionEvents(stack, ["alice@contoso.example", "bob@contoso.example", "erin@contoso.example"])
        #expect(ids.count == 6)
        let fresh = Array(ids[4...])
        // The service's own keep-alive job (its first pass 10–70 s after start) would prune the
        // same events: stopped, so the passes measured are only the command line's.
        await stack.relay.stopAndWait()
        try await Self.age(stack, Array(ids[0..<4]), days: 31)
        // 2,500 more aged events: several DELETE statements of at most 1,000 rows each.
        _ = try await stack.withDatabase { connection in
            try connection.query(
                """
                INSERT INTO account_events (account_id, event_id, type, occurred_at)
                SELECT 'acc_bulk', 'evt_bulk_' || n, 'account.deleted', now() - interval '40 days' FROM generate_series(1, 2500) AS n
                """)
        }

        // Under the default retention (30 days), 31 days old goes and today stays.
        let summary = try await KeepAliveAndEventsTests.keepAlivePass(stack)
        #expect(summary["ran"] as? Bool == true)
        #expect(summary["pruned_events"] as? Int == 2_504, "\(summary)")
        #expect(try await Self.storedIds(stack) == fresh)
        try await stack.restartRelay(environment: [:])
        #expect(try await KeepAliveAndEventsTests.events(stack).compactMap { $0["id"] as? String } == fresh)
        await stack.relay.stopAndWait()

        // A longer retention keeps what the default would drop; a shorter one drops it.
        try await Self.age(stack, fresh, days: 5)
        #expect(try await KeepAliveAndEventsTests.keepAlivePass(stack, ["TOKENRELAY_EVENTS_RETENTION_DAYS": "7"])["pruned_events"] as? Int == 0)
        #expect(try await Self.storedIds(stack) == fresh)
        #expect(try await KeepAliveAndEventsTests.keepAlivePass(stack, ["TOKENRELAY_EVENTS_RETENTION_DAYS": "3"])["pruned_events"] as? Int == 2)
        #expect(try await Self.storedIds(stack).isEmpty)

        // Keep-alive off: the pass still prunes. Out of range: refused.
        let ok = try await KeepAliveAndEventsTests.tokenRelay(
            ["keepalive", "--once"], environment: stack.environment.merging(["TOKENRELAY_KEEPALIVE_AFTER_DAYS": "0"]) { $1 })
        #expect(ok.status == 0, "\(ok.error)")
        let refused = try await KeepAliveAndEventsTests.tokenRelay(
            ["keepalive", "--once"], environment: stack.environment.merging(["TOKENRELAY_EVENTS_RETENTION_DAYS": "0"]) { $1 })
        #expect(refused.status != 0)
        #expect(refused.error.contains("TOKENRELAY_EVENTS_RETENTION_DAYS"), "\(refused.error)")
    }

    @Test("With a webhook URL, an aged event the receiver has not acknowledged stays; an acknowledged one goes")
    func undeliveredEventsStay() async throws {
        // The receiver answers 503: nothing is ever acknowledged by it.
        let receiver = WebhookReceiver()
        let server = HTTPServer(configuration: HTTPServerConfiguration(host: "127.0.0.1", port: 0, threadCount: 1), handler: receiver)
        try server.start()
        defer { server.stop() }
        let stack = try await TokenRelayStack(
            name: "e2e_events_retention_webhook",
            environment: [
                "TOKENRELAY_WEBHOOK_URL": "http://127.0.0.1:\(server.port)/hooks", "TOKENRELAY_WEBHOOK_SECRET": "whsec-retention",
                "TOKENRELAY_WEBHOOK_MAX_BACKOFF_S": "1",
            ])
        defer { stack.stop() }
        let ids = try await Self.deletionEvents(stack, ["alice@contoso.example", "bob@contoso.example"])
        #expect(ids.count == 4)
        #expect(try await eventually(within: 10) { !receiver.requests.isEmpty })
        try await Self.age(stack, ids, days: 365)
        // As if the receiver had acknowledged the first (in order, as delivery goes).
        _ = try await stack.withDatabase { connection in
            try connection.query("UPDATE account_events SET delivered_at = now() WHERE event_id = $1", [.text(ids[0])])
        }
        let summary = try await KeepAliveAndEventsTests.keepAlivePass(stack)
        #expect(summary["pruned_events"] as? Int == 1, "\(summary)")
        #expect(try await Self.storedIds(stack) == Array(ids[1...]), "an undelivered event was pruned")
    }

    @Test("A relay started with a webhook URL on a database with old events delivers only the events after it started")
    func deliveryStartsWhenTheWebhookIsSet() async throws {
        let receiver = WebhookReceiver()
        receiver.setUp(true)
        let server = HTTPServer(configuration: HTTPServerConfiguration(host: "127.0.0.1", port: 0, threadCount: 1), handler: receiver)
        try server.start()
        defer { server.stop() }
        let stack = try await TokenRelayStack(name: "e2e_events_webhook_start")
        defer { stack.stop() }
        // History from before any webhook: never to be POSTed.
        let old = try await Self.deletionEvents(stack, ["alice@contoso.example", "bob@contoso.example"])
        #expect(old.count == 4)

        try await stack.restartRelay(environment: [
            "TOKENRELAY_WEBHOOK_URL": "http://127.0.0.1:\(server.port)/hooks", "TOKENRELAY_WEBHOOK_SECRET": "whsec-start",
        ])
        let new = try await Self.deletionEvents(stack, ["erin@contoso.example"])
        #expect(try await eventually(within: 10) { receiver.accepted.count >= 2 })
        // The deliverer looks every second: three more looks find nothing older to send.
        try await Task.sleep(for: .seconds(3))
        #expect(receiver.requests.map(\.eventId) == new, "delivered \(receiver.requests.map(\.eventId)); old \(old)")

        // A second start (a restart, another replica) keeps the first point.
        try await stack.restartRelay(environment: [:])
        let newer = try await Self.deletionEvents(stack, ["alice@contoso.example"])
        #expect(try await eventually(within: 10) { receiver.accepted.count >= 4 })
        try await Task.sleep(for: .seconds(2))
        #expect(receiver.requests.map(\.eventId) == new + newer)
        // The history is still listed, and it is never owed: the retention drops it once old.
        #expect(try await KeepAliveAndEventsTests.events(stack).compactMap { $0["id"] as? String } == old + new + newer)
        try await Self.age(stack, old, days: 31)
        #expect(try await KeepAliveAndEventsTests.keepAlivePass(stack)["pruned_events"] as? Int == 4)
        #expect(try await Self.storedIds(stack) == new + newer)
    }
}
