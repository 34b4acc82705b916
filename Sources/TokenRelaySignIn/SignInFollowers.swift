import Synchronization

/// Requests of this replica waiting for a sign-in to finish (`GET /v1/sign-ins/{id}?wait=S`,
/// behaviour §3.9). They hold no database connection while they wait: the `sign_in.finished`
/// notification (``ReplicaNotifications``, sent by whichever replica ran the callback) wakes
/// them through ``wake(signInId:)``, and each then reads the sign-in again.
///
/// A follower is registered before it reads the sign-in (``follow(_:)``), so a wake-up that
/// arrives between its read and its wait is not lost: the wait then returns at once.
package final class SignInFollowers: Sendable {
    package init() {}

    private struct Follower {
        var woken = false
        var continuation: CheckedContinuation<Void, Never>?
    }

    private struct State {
        var followers: [String: [UInt64: Follower]] = [:]
        var nextId: UInt64 = 0
        var stopping = false
    }

    private let state = Mutex(State())

    /// One request's interest in one sign-in; ``end()`` it when done.
    package struct Ticket: Sendable {
        fileprivate let signInId: String
        fileprivate let id: UInt64
        fileprivate let owner: SignInFollowers

        /// Waits until the sign-in is woken (since ``follow(_:)`` or the last wait) or `seconds` pass.
        package func wait(seconds: Double) async {
            await owner.wait(self, seconds: seconds)
        }

        package func end() { owner.remove(self) }
    }

    /// Starts following `signInId`: wake-ups from now on are kept for the next ``Ticket/wait(seconds:)``.
    package func follow(_ signInId: String) -> Ticket {
        let id = state.withLock { state -> UInt64 in
            state.nextId += 1
            state.followers[signInId, default: [:]][state.nextId] = Follower()
            return state.nextId
        }
        return Ticket(signInId: signInId, id: id, owner: self)
    }

    /// Wakes every follower of `signInId`.
    package func wake(signInId: String) {
        let continuations = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard var followers = state.followers[signInId] else { return [] }
            var woken: [CheckedContinuation<Void, Never>] = []
            for key in followers.keys {
                if let continuation = followers[key]?.continuation { woken.append(continuation) }
                followers[key] = Follower(woken: true, continuation: nil)
            }
            state.followers[signInId] = followers
            return woken
        }
        for continuation in continuations { continuation.resume() }
    }

    /// Wakes every follower (notifications may have been missed, or the replica is stopping).
    package func wakeAll() {
        let ids = state.withLock { Array($0.followers.keys) }
        for id in ids { wake(signInId: id) }
    }

    /// Ends every wait now and any later one at once: the replica is stopping, and a long poll
    /// answers the status it has rather than hold the drain.
    package func stopWaiting() {
        state.withLock { $0.stopping = true }
        wakeAll()
    }

    /// Whether ``stopWaiting()`` was called.
    package var isStopping: Bool { state.withLock { $0.stopping } }

    /// Requests following a sign-in now (a gauge).
    package var count: Int { state.withLock { $0.followers.values.reduce(0) { $0 + $1.count } } }

    private func wait(_ ticket: Ticket, seconds: Double) async {
        guard seconds > 0 else { return }
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state -> Bool in
                guard !state.stopping, var follower = state.followers[ticket.signInId]?[ticket.id] else { return true }
                if follower.woken {
                    follower.woken = false
                    state.followers[ticket.signInId]?[ticket.id] = follower
                    return true
                }
                follower.continuation = continuation
                state.followers[ticket.signInId]?[ticket.id] = follower
                return false
            }
            if resumeNow {
                continuation.resume()
                return
            }
            // This wait's own timer: it ends within `seconds` (at most 60) and does no I/O, so no
            // service owns it.
            Task { [weak self] in
                try? await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
                self?.timeOut(ticket)
            }
        }
    }

    private func timeOut(_ ticket: Ticket) {
        let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard var follower = state.followers[ticket.signInId]?[ticket.id], let continuation = follower.continuation else { return nil }
            follower.continuation = nil
            state.followers[ticket.signInId]?[ticket.id] = follower
            return continuation
        }
        continuation?.resume()
    }

    private func remove(_ ticket: Ticket) {
        let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
            let removed = state.followers[ticket.signInId]?.removeValue(forKey: ticket.id)
            if state.followers[ticket.signInId]?.isEmpty == true { state.followers[ticket.signInId] = nil }
            return removed?.continuation
        }
        continuation?.resume()
    }
}
