import Foundation
internal import Glibc
import Synchronization

/// Cuts off clients that take too long to send a request (request line, headers and body), such
/// as a client trickling one header or body byte at a time: libmicrohttpd's own timeout
/// (`MHD_OPTION_CONNECTION_TIMEOUT`) only counts silence, so such a client would hold its
/// connection (and a share of the connection limit) for ever.
///
/// Each connection is tracked from libmicrohttpd's "connection started" notification to its
/// "closed" one. Its clock starts when it opens and again after each request completes; it
/// stops while a request is being handled (from the last body byte to the response). A watchdog
/// thread shuts down (`shutdown(2)`, never `close`) the socket of a connection whose head is
/// late; libmicrohttpd then sees the socket end and closes the connection itself. The registry
/// lock is held across `shutdown`, and libmicrohttpd reports "closed" (which takes the same lock)
/// before it closes the socket, so a socket number is never used after it was reused.
final class RequestHeadDeadlines: Sendable {
    /// One connection's clock.
    final class Track: Sendable {
        let socket: Int32
        /// Milliseconds of the monotonic clock when the wait for a head began; -1 while a request
        /// is handled.
        let waitingSince: Atomic<Int64>

        init(socket: Int32, now: Int64) {
            self.socket = socket
            waitingSince = Atomic(now)
        }

        /// The whole request (head and body) arrived: the connection is busy with it.
        func requestStarted() { waitingSince.store(-1, ordering: .relaxed) }

        /// The response went out: the next head is awaited from now.
        func requestCompleted() { waitingSince.store(RequestHeadDeadlines.nowMillis(), ordering: .relaxed) }
    }

    private struct State {
        var tracks: [ObjectIdentifier: Track] = [:]
        var stopped = false
    }

    /// Milliseconds a head may take.
    let limitMillis: Int64
    private let state = Mutex(State())

    /// - Parameter seconds: how long a request head may take, > 0.
    init(seconds: Int) {
        limitMillis = Int64(seconds) * 1000
    }

    /// Registers a new connection; returns its track (kept in the connection's socket context).
    func opened(socket: Int32) -> Track {
        let track = Track(socket: socket, now: Self.nowMillis())
        state.withLock { $0.tracks[ObjectIdentifier(track)] = track }
        return track
    }

    /// Forgets a connection libmicrohttpd is about to close.
    func closed(_ track: Track) {
        _ = state.withLock { $0.tracks.removeValue(forKey: ObjectIdentifier(track)) }
    }

    /// Starts the watchdog thread; it checks four times per limit (at most every second) until
    /// ``stop()``.
    func start() {
        let interval = min(1.0, Double(limitMillis) / 4000)
        let thread = Thread { [self] in
            while !state.withLock({ $0.stopped }) {
                Thread.sleep(forTimeInterval: interval)
                shutDownLate()
            }
        }
        thread.start()
        // After start(): Foundation on Linux gives a name set before it to no thread; at most 15
        // bytes (/proc/…/comm).
        thread.name = "head-deadlines"
    }

    func stop() {
        state.withLock { $0.stopped = true }
    }

    /// Shuts down every connection whose head is overdue; returns how many.
    @discardableResult
    func shutDownLate(now: Int64 = RequestHeadDeadlines.nowMillis()) -> Int {
        state.withLock { state in
            var count = 0
            for track in state.tracks.values {
                let since = track.waitingSince.load(ordering: .relaxed)
                if since >= 0 && now - since > limitMillis {
                    // Reset so one late connection is shut down once, not on every tick.
                    track.waitingSince.store(now, ordering: .relaxed)
                    shutdown(track.socket, Int32(SHUT_RDWR))
                    count += 1
                }
            }
            return count
        }
    }

    static func nowMillis() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }
}
