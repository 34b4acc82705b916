import Foundation

/// Time and chance as the retry loop sees them, injected so that tests of Retry-After, backoff and
/// deadlines run without sleeping (STYLE: time is injected). The service's reads its time from
/// the one ``RelayClock``.
package struct UpstreamClock: Sendable {
    /// The current time.
    package let now: @Sendable () -> Date
    /// Waits this many seconds (returns early only when the task is cancelled).
    package let sleep: @Sendable (Double) async -> Void
    /// A value in [0, 1) for full jitter.
    package let random: @Sendable () -> Double

    package init(now: @escaping @Sendable () -> Date, sleep: @escaping @Sendable (Double) async -> Void, random: @escaping @Sendable () -> Double) {
        self.now = now
        self.sleep = sleep
        self.random = random
    }

    /// `clock`'s wall time, `Task.sleep` and the system random generator.
    package init(_ clock: RelayClock) {
        self.init(
            now: { clock.date }, sleep: { seconds in try? await Task.sleep(for: .seconds(seconds)) }, random: { Double.random(in: 0..<1) })
    }

    /// The system clock, `Task.sleep` and the system random generator.
    package static let system = UpstreamClock(.system)
}
