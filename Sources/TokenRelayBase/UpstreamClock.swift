import Dispatch
import Foundation
import Synchronization

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
    /// Whether `sleep` is a real-time wait, so a timer (``schedule(after:_:)``) may be a dispatch
    /// timer rather than a task sleeping on this clock.
    private let sleepsInRealTime: Bool

    package init(now: @escaping @Sendable () -> Date, sleep: @escaping @Sendable (Double) async -> Void, random: @escaping @Sendable () -> Double) {
        self.init(now: now, sleep: sleep, random: random, sleepsInRealTime: false)
    }

    private init(
        now: @escaping @Sendable () -> Date, sleep: @escaping @Sendable (Double) async -> Void, random: @escaping @Sendable () -> Double,
        sleepsInRealTime: Bool
    ) {
        self.now = now
        self.sleep = sleep
        self.random = random
        self.sleepsInRealTime = sleepsInRealTime
    }

    /// `clock`'s wall time, `Task.sleep` and the system random generator.
    package init(_ clock: RelayClock) {
        self.init(
            now: { clock.date }, sleep: { seconds in try? await Task.sleep(for: .seconds(seconds)) }, random: { Double.random(in: 0..<1) },
            sleepsInRealTime: true)
    }

    /// The system clock, `Task.sleep` and the system random generator.
    package static let system = UpstreamClock(.system)

    /// Runs `action` once `seconds` have passed on this clock, unless the returned timer is
    /// cancelled first. With a real-time `sleep` it is a dispatch timer: arming and cancelling it
    /// start no task (a cancelled one still fires at its time, doing nothing), which matters to
    /// the waits that nearly always end early (a caller's deadline, a lease renewal: issue 30);
    /// with an injected `sleep` it is a task sleeping on this clock, as before.
    package func schedule(after seconds: Double, _ action: @escaping @Sendable () -> Void) -> ScheduledAction {
        let scheduled = ScheduledAction(action)
        if sleepsInRealTime {
            DispatchQueue.global().asyncAfter(deadline: .now() + max(0, seconds)) { scheduled.fire() }
        } else {
            let sleep = self.sleep
            Task {
                await sleep(seconds)
                scheduled.fire()
            }
        }
        return scheduled
    }
}

/// An action ``UpstreamClock/schedule(after:_:)`` runs once, unless cancelled before.
package final class ScheduledAction: Sendable {
    private let action: Mutex<(@Sendable () -> Void)?>

    fileprivate init(_ action: @escaping @Sendable () -> Void) {
        self.action = Mutex(action)
    }

    /// Drops the action if it has not run (it never will); without effect after.
    package func cancel() {
        _ = action.withLock { $0.take() }
    }

    fileprivate func fire() {
        action.withLock { $0.take() }?()
    }
}
