import Foundation
import Synchronization
import TokenRelayBase

/// Refreshes of this replica waiting for another redemption of the same account's refresh
/// token to end (ADR 0012). They are woken when the lease is released: by this replica's own
/// executor, or by the `refresh.released` notification of another replica. A wake-up that is
/// missed (sent between the claim and the wait, or while notifications do not flow) costs at
/// most one poll interval: every wait is bounded.
package final class LeaseWaiters: Sendable {
    package init() {}

    private struct State {
        var waiting: [String: [UInt64: CheckedContinuation<Void, Never>]] = [:]
        var nextId: UInt64 = 0
    }

    private let state = Mutex(State())

    /// Waits until the account's lease is released or `seconds` pass.
    package func wait(accountId: String, seconds: Double) async {
        guard seconds > 0 else { return }
        let id = state.withLock { state -> UInt64 in
            state.nextId += 1
            return state.nextId
        }
        await withCheckedContinuation { continuation in
            state.withLock { $0.waiting[accountId, default: [:]][id] = continuation }
            // This wait's own timer: it ends within `seconds` (bounded by the request's deadline)
            // and does no I/O, so no service owns it.
            Task { [weak self] in
                try? await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
                self?.resume(accountId: accountId, id: id)
            }
        }
    }

    /// Wakes every refresh waiting for the account's lease.
    package func wake(accountId: String) {
        let woken = state.withLock { $0.waiting.removeValue(forKey: accountId) }
        for continuation in woken?.values ?? [:].values { continuation.resume() }
    }

    /// Refreshes waiting now (a gauge).
    package var count: Int { state.withLock { $0.waiting.values.reduce(0) { $0 + $1.count } } }

    private func resume(accountId: String, id: UInt64) {
        let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
            let found = state.waiting[accountId]?.removeValue(forKey: id)
            if state.waiting[accountId]?.isEmpty == true { state.waiting[accountId] = nil }
            return found
        }
        continuation?.resume()
    }
}
