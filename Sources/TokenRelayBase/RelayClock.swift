import Foundation
import Synchronization

/// The service's one source of time (STYLE: time is injected), built once by the composition
/// (`AppDependencies`) and handed to whatever reads the service's own time facts: a token's
/// `expires_on` and `refresh_on`, memories' and caches' expiry, a lease claim's now, a pending
/// sign-in's expiry, issuance counts; and a monotonic reading for durations that must not jump
/// when the wall clock is set. ``system`` in the service; a ``TestClock`` in tests, moved by
/// hand instead of sleeping (postgres-nio's `MockClock`).
///
/// Two kinds of reading stay on ``system`` whatever the composition was given: what bounds real
/// waiting, read through ``UpstreamClock`` (request deadlines and every wait on them: the
/// redemption slot, the coalesced refresh, the lease holder; sleeps, backoff and Retry-After;
/// the lease renewal and the pending rotation's window), and times another party checks against
/// its own clock (client assertions, webhook signatures). Log lines carry the machine's time,
/// to be read beside other systems' logs.
package struct RelayClock: Sendable {
    private let readWall: @Sendable () -> Double
    private let readMonotonic: @Sendable () -> Double

    /// - Parameters:
    ///   - wall: Unix time, seconds with fraction.
    ///   - monotonic: seconds from an arbitrary origin that never goes back.
    package init(wall: @escaping @Sendable () -> Double, monotonic: @escaping @Sendable () -> Double) {
        readWall = wall
        readMonotonic = monotonic
    }

    /// Unix time, seconds with fraction.
    package var unixTime: Double { readWall() }
    /// Unix time in whole seconds (rounded down): token times, memories.
    package var seconds: Int { Int(readWall().rounded(.down)) }
    /// The wall time as a `Date`.
    package var date: Date { Date(timeIntervalSince1970: readWall()) }
    /// Seconds from an arbitrary origin, never going back: measure durations with it.
    package var monotonicSeconds: Double { readMonotonic() }

    /// The system's clocks: `Date()` and ``monotonicNow()``.
    package static let system = RelayClock(wall: { Date().timeIntervalSince1970 }, monotonic: monotonicNow)

    /// Seconds of the system's monotonic clock (`CLOCK_MONOTONIC`, from boot): what every request
    /// reads for its duration and rate budget. Read directly: `ContinuousClock`'s `Duration` keeps
    /// attoseconds in 128 bits, and its conversion to seconds cost about 300 instructions of a
    /// cached answer (behaviour §10).
    package static func monotonicNow() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }
}

/// A clock for tests: it stands still until ``advance(by:)`` moves it, wall and monotonic
/// together.
package final class TestClock: Sendable {
    private let elapsed = Mutex<Double>(0)
    private let start: Double

    /// - Parameter unixTime: the wall time it starts at. Default 2026-01-01T00:00:00Z.
    package init(unixTime: Double = 1_767_225_600) {
        start = unixTime
    }

    /// Moves both readings forward by `seconds` (not backwards: the monotonic one never goes back).
    package func advance(by seconds: Double) {
        precondition(seconds >= 0, "a clock does not go back")
        elapsed.withLock { $0 += seconds }
    }

    /// The ``RelayClock`` that reads this one.
    package var clock: RelayClock {
        RelayClock(wall: { self.start + self.elapsedSeconds }, monotonic: { self.elapsedSeconds })
    }

    private var elapsedSeconds: Double {
        elapsed.withLock { $0 }
    }
}
