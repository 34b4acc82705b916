import Foundation

/// Time and chance as the retry loop sees them, injected so that tests of Retry-After, backoff and
/// deadlines run without sleeping (STYLE: time is injected).
struct UpstreamClock: Sendable {
    /// The current time.
    let now: @Sendable () -> Date
    /// Waits this many seconds (returns early only when the task is cancelled).
    let sleep: @Sendable (Double) async -> Void
    /// A value in [0, 1) for full jitter.
    let random: @Sendable () -> Double

    /// The system clock, `Task.sleep` and the system random generator.
    static let system = UpstreamClock(
        now: { Date() }, sleep: { seconds in try? await Task.sleep(for: .seconds(seconds)) }, random: { Double.random(in: 0..<1) })
}
