import Foundation
import PostgresBridge
import Synchronization
import Testing
import TokenRelayTesting

/// LISTEN/NOTIFY through the bridge (libpq `PQconsumeInput`/`PQnotifies` on socket readiness).
@Suite("PostgreSQL listener")
struct PostgresListenerTests {
    final class Events: Sendable {
        let list = Mutex<[PostgresListener.Event]>([])
        func add(_ event: PostgresListener.Event) { list.withLock { $0.append(event) } }
        var all: [PostgresListener.Event] { list.withLock { $0 } }
        var payloads: [String] {
            all.compactMap { if case .notification(_, let payload) = $0 { payload } else { nil } }
        }
        var listeningCount: Int {
            all.filter { if case .listening = $0 { true } else { false } }.count
        }
    }

    /// Polls until `condition` holds, up to `seconds`.
    static func eventually(_ seconds: Double = 5, _ condition: () -> Bool) async throws -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    @Test(
        "notifications committed on another connection arrive in order; none from a rolled-back transaction; the session comes back after its backend is killed"
    )
    func listenNotifyAndReconnect() async throws {
        try await TestPostgres.withFreshDatabase(named: "pg_listen") { url in
            let events = Events()
            let listener = PostgresListener(url: url, channels: ["test_channel"], retryDelay: 0.1) { events.add($0) }
            listener.start()
            defer { listener.stop() }
            #expect(try await Self.eventually { listener.isListening })
            let pool = PostgresPool(url: url, size: 1)
            defer { pool.close() }
            try await pool.withConnection { connection in
                try connection.transaction { connection in
                    _ = try connection.query("SELECT pg_notify('test_channel', 'one')")
                    _ = try connection.query("SELECT pg_notify('other_channel', 'ignored')")
                    _ = try connection.query("SELECT pg_notify('test_channel', 'two')")
                }
                try connection.execute("BEGIN; SELECT pg_notify('test_channel', 'rolled back'); ROLLBACK")
                _ = try connection.query("SELECT pg_notify('test_channel', 'three')")
            }
            #expect(try await Self.eventually { events.payloads.count >= 3 })
            #expect(events.payloads == ["one", "two", "three"])
            #expect(events.all.first == .listening(afterGap: false))

            // Kill the listening session: it must come back by itself and say there was a gap.
            try await pool.withConnection { connection in
                _ = try connection.query(TestPostgres.terminateOtherSessions)
            }
            #expect(try await Self.eventually { events.listeningCount == 2 })
            #expect(events.all.contains(.listening(afterGap: true)))
            try await pool.withConnection { connection in
                _ = try connection.query("SELECT pg_notify('test_channel', 'after')")
            }
            #expect(try await Self.eventually { events.payloads.last == "after" })
        }
    }
}
