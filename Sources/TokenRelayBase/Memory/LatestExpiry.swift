import Synchronization

/// The latest expiry (unix seconds) of anything a memory has remembered: before it the memory may
/// hold something, after it nothing. One atomic read tells a caller it can skip the memory's
/// lookup (the silent plan asks this on every cached answer); a `true` may be stale after a
/// forget, and the lookup tells.
package final class LatestExpiry: Sendable {
    private let latest = Atomic<Int>(0)

    package init() {}

    /// Something was remembered until `expiry`.
    package func note(_ expiry: Int) {
        var current = latest.load(ordering: .relaxed)
        while current < expiry {
            let (exchanged, original) = latest.compareExchange(expected: current, desired: expiry, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    /// Whether anything remembered may still be live at `now`.
    package func mayHold(now: Int) -> Bool { latest.load(ordering: .relaxed) > now }
}
