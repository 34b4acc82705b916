import Foundation
import Synchronization
import TokenRelayBase

/// This replica's bound on refresh-token redemptions in flight (`TOKENRELAY_MAX_CONCURRENT_REFRESHES`,
/// default 256; ADR 0012). It is ours, not the database pool's: no connection is held while the
/// STS answers, so the pool no longer limits refreshes, and this keeps a storm from opening
/// thousands of STS calls at once. Waiters are served first come, first served.
package final class RedemptionLimiter: Sendable {
    private struct State {
        var available: Int
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Bool, Never>)] = []
        var nextId: UInt64 = 0
    }

    private let state: Mutex<State>
    package let limit: Int
    /// The waiting clock (``UpstreamClock``) a waiter's deadline is read on.
    private let clock: UpstreamClock

    package init(limit: Int, clock: UpstreamClock = .system) {
        self.limit = limit
        self.clock = clock
        state = Mutex(State(available: limit))
    }

    /// Redemptions in flight now.
    package var inFlight: Int { state.withLock { limit - $0.available } }
    /// Refreshes waiting for a slot now.
    package var waiting: Int { state.withLock { $0.waiters.count } }

    /// Takes a slot, waiting until `deadline` at most.
    /// - Returns: false when the deadline passed first (the caller answers 503).
    package func acquire(until deadline: Date) async -> Bool {
        let id: UInt64? = state.withLock { state in
            if state.available > 0 {
                state.available -= 1
                return nil
            }
            state.nextId += 1
            return state.nextId
        }
        guard let id else { return true }
        let seconds = deadline.timeIntervalSince(clock.now())
        guard seconds > 0 else { return false }
        return await withCheckedContinuation { continuation in
            let queued = state.withLock { state -> Bool in
                // A slot may have come free between the two locks.
                if state.available > 0 {
                    state.available -= 1
                    return false
                }
                state.waiters.append((id, continuation))
                return true
            }
            guard queued else { return continuation.resume(returning: true) }
            // This wait's own timer: it ends at the request's deadline and does no I/O, so no
            // service owns it.
            let clock = self.clock
            Task { [weak self] in
                await clock.sleep(seconds)
                self?.giveUp(id)
            }
        }
    }

    /// Returns a slot: the longest waiter gets it.
    package func release() {
        let next = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            if state.waiters.isEmpty {
                state.available += 1
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        next?.resume(returning: true)
    }

    private func giveUp(_ id: UInt64) {
        let timedOut = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index).continuation
        }
        timedOut?.resume(returning: false)
    }
}
