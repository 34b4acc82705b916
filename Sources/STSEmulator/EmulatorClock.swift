import Foundation
import Synchronization

/// The emulator's source of time, injected so tests can age codes, tokens and rotation graces
/// without sleeping.
public protocol EmulatorClock: Sendable {
    /// The current time.
    func now() -> Date
}

/// Wall-clock time.
public struct SystemClock: EmulatorClock {
    public init() {}
    public func now() -> Date { Date() }
}

/// A clock that moves only when told to; for tests.
public final class ManualClock: EmulatorClock {
    private let current: Mutex<Date>

    /// - Parameter start: the initial time (default: now, rounded down to a whole second).
    public init(start: Date = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))) {
        current = Mutex(start)
    }

    public func now() -> Date { current.withLock { $0 } }

    /// Moves the clock forward.
    /// - Parameter seconds: how far (seconds; may be fractional).
    public func advance(by seconds: TimeInterval) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }
}
