import Foundation
import Synchronization

/// A dedicated PostgreSQL connection that `LISTEN`s on channels and hands every notification to a
/// callback, on a thread of its own; it reconnects by itself after losing the server.
///
/// LISTEN is session state: it needs a direct connection, not one through pgbouncer in
/// transaction mode (behaviour §8, `TOKENRELAY_DATABASE_LISTEN_URL`). TCP keep-alives are on, so a
/// silently dropped network path is noticed within about 15 seconds.
public final class PostgresListener: Sendable {
    /// What the listener reports, in order, on its own thread.
    public enum Event: Sendable, Equatable {
        /// Listening (again). `afterGap` is true when an earlier session was lost: notifications
        /// sent in between were missed, so whatever they would have invalidated may be stale.
        case listening(afterGap: Bool)
        /// A `NOTIFY` on one of the channels (`pg_notify(channel, payload)`).
        case notification(channel: String, payload: String)
        /// The session was lost or could not be made; a reconnect follows after `retryDelay`.
        case disconnected(reason: String)
    }

    private let url: String
    private let channels: [String]
    private let retryDelay: Double
    private let onEvent: @Sendable (Event) -> Void
    private let state = Mutex(ListenerState())

    private struct ListenerState {
        var started = false
        var stopped = false
        var listening = false
    }

    /// - Parameters:
    ///   - url: libpq URL of a direct connection (not through a transaction-mode pooler).
    ///   - channels: channel names (identifiers; quoted when sent).
    ///   - retryDelay: seconds between reconnect attempts. Default 0.5.
    ///   - onEvent: called on the listener's thread; keep it short and non-blocking.
    public init(url: String, channels: [String], retryDelay: Double = 0.5, onEvent: @escaping @Sendable (Event) -> Void) {
        self.url = url
        self.channels = channels
        self.retryDelay = retryDelay
        self.onEvent = onEvent
    }

    deinit { stop() }

    /// Whether a LISTEN session is up right now (for readiness and metrics).
    public var isListening: Bool { state.withLock { $0.listening } }

    /// Starts the listener thread (once).
    public func start() {
        let first = state.withLock { state -> Bool in
            defer { state.started = true }
            return !state.started && !state.stopped
        }
        guard first else { return }
        let thread = Thread { [self] in run() }
        thread.start()
        thread.name = "postgres-listen"  // after start(): see PostgresPool.init
    }

    /// Stops the thread within about 0.2 s and closes its connection. Idempotent.
    public func stop() {
        state.withLock { $0.stopped = true }
    }

    private var isStopped: Bool { state.withLock { $0.stopped } }

    private func run() {
        var hadSession = false
        while !isStopped {
            // A new connection each session: its deinit closes the old socket.
            let connection = PostgresConnection(
                url: url, defaults: [("keepalives", "1"), ("keepalives_idle", "5"), ("keepalives_interval", "2"), ("keepalives_count", "3")])
            do {
                for channel in channels {
                    try connection.execute("LISTEN \"\(channel.replacingOccurrences(of: "\"", with: "\"\""))\"")
                }
                state.withLock { $0.listening = true }
                onEvent(.listening(afterGap: hadSession))
                hadSession = true
                while !isStopped {
                    for item in try connection.waitForNotifications(timeoutMilliseconds: 200) {
                        onEvent(.notification(channel: item.channel, payload: item.payload))
                    }
                }
            } catch {
                state.withLock { $0.listening = false }
                // A failed first connect is also a gap: nothing was heard before it either.
                hadSession = true
                onEvent(.disconnected(reason: String(describing: error)))
                let until = Date().addingTimeInterval(retryDelay)
                while !isStopped && Date() < until { Thread.sleep(forTimeInterval: 0.05) }
            }
        }
        state.withLock { $0.listening = false }
    }
}
