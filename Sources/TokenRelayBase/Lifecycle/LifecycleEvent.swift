import Synchronization

/// A one-shot event: ``signalled()`` suspends until ``signal()`` was called (before or after), or the
/// waiting task is cancelled. Any number of waiters; `signal()` from any thread, including a
/// dispatch signal handler (it never awaits).
package final class LifecycleEvent: Sendable {
    package init() {}

    private struct State {
        var signalled = false
        var nextId = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Mutex(State())

    /// Whether ``signal()`` was called.
    package var isSignalled: Bool { state.withLock { $0.signalled } }

    /// Wakes every waiter, now and later. Idempotent.
    package func signal() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.signalled = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once signalled or once the calling task is cancelled (check `Task.isCancelled` or
    /// ``isSignalled`` to tell which).
    package func signalled() async {
        let id = state.withLock { state -> Int in
            defer { state.nextId += 1 }
            return state.nextId
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.signalled || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}
