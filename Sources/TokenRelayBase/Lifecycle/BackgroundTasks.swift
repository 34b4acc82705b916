import Synchronization

/// The work of this replica that no request awaits to its end, owned by one service so that a
/// shutdown drains it before the pool closes: the touch and the proactive refresh a cache hit
/// starts, a refresh whose callers stopped waiting, a lease release retried, a rotated refresh
/// token not stored yet.
///
/// Work starts at once in a task of its own, also when no ``ServiceGroup`` runs this service
/// (`keepalive --once`, tests driving the handler): the service only decides how it ends.
///
/// Stopping (its ``run()`` cancelled, or ``beginGrace()``): work that may be skipped
/// (``startIfRoom(_:)``) is refused; work running gets until the grace deadline, `graceSeconds`
/// after ``beginGrace()`` (the group calls it when a shutdown starts, so the HTTP drain and this
/// one share `TOKENRELAY_SHUTDOWN_TIMEOUT_S`), then each task still running is cancelled and
/// given `cancelSeconds` to return. Work that must not be lost watches `Task.isCancelled`: that
/// is its last word, it logs what it gives up and returns. Work started after the deadline
/// starts cancelled.
package final class BackgroundTasks: Service {
    package let name = "BackgroundTasks"
    /// Tasks running at once beyond which ``startIfRoom(_:)`` refuses. Default 1,024.
    package let limit: Int
    /// Seconds from ``beginGrace()`` until running work is cancelled. Default 10.
    package let graceSeconds: Double
    /// Seconds a cancelled task has to return before the service stops without it. Default 1.
    package let cancelSeconds: Double
    private let logger: Logger?

    private struct State {
        var running: [UInt64: @Sendable () -> Void] = [:]
        var nextId: UInt64 = 0
        var graceDeadline: ContinuousClock.Instant?
        var graceOver = false
        /// While the service drains: signalled once nothing runs.
        var idle: LifecycleEvent?
    }

    private let state = Mutex(State())

    package init(limit: Int = 1024, graceSeconds: Double = 10, cancelSeconds: Double = 1, logger: Logger? = nil) {
        self.limit = limit
        self.graceSeconds = graceSeconds
        self.cancelSeconds = cancelSeconds
        self.logger = logger
    }

    /// Tasks running now.
    package var count: Int { state.withLock { $0.running.count } }

    /// Runs `work` in a task this service owns and returns that task (for a caller that shares
    /// its value, like a coalesced refresh). Always started: for work that must not be lost.
    @discardableResult
    package func task<Value: Sendable>(_ work: @escaping @Sendable () async throws -> Value) -> Task<Value, any Error> {
        state.withLock { state in
            let (task, cancelNow) = Self.register(&state, work, finished: finished)
            if cancelNow { task.cancel() }
            return task
        }
    }

    /// Runs `work` in a task this service owns; always started (see ``task(_:)``).
    package func start(_ work: @escaping @Sendable () async -> Void) {
        _ = task(work)
    }

    /// Runs `work` in a task this service owns unless `limit` tasks run or a shutdown began:
    /// for work that may be skipped (a touch, a proactive refresh).
    /// - Returns: whether `work` was started.
    @discardableResult
    package func startIfRoom(_ work: @escaping @Sendable () async -> Void) -> Bool {
        state.withLock { state in
            guard state.graceDeadline == nil, state.running.count < limit else { return false }
            _ = Self.register(&state, work, finished: finished)
            return true
        }
    }

    /// Starts the grace: running work may finish until `graceSeconds` from now. Idempotent (the
    /// first call's deadline holds).
    /// - Returns: the grace deadline.
    @discardableResult
    package func beginGrace() -> ContinuousClock.Instant {
        let graceSeconds = self.graceSeconds
        return state.withLock { state in
            if let deadline = state.graceDeadline { return deadline }
            let deadline = ContinuousClock.now + .milliseconds(Int(graceSeconds * 1000))
            state.graceDeadline = deadline
            return deadline
        }
    }

    /// Waits until stopped, then drains: see the type's description.
    package func run() async {
        await Lifecycle.untilCancelled()
        await waitUntilIdle(until: beginGrace())
        let late = state.withLock { state -> [@Sendable () -> Void] in
            state.graceOver = true
            return Array(state.running.values)
        }
        guard !late.isEmpty else { return }
        logger?.warn("background.cancelled", ["tasks.count": String(late.count)])
        for cancel in late { cancel() }
        await waitUntilIdle(until: .now + .milliseconds(Int(cancelSeconds * 1000)))
    }

    /// Returns once no task runs, or at `deadline`.
    private func waitUntilIdle(until deadline: ContinuousClock.Instant) async {
        let idle = state.withLock { state -> LifecycleEvent? in
            guard !state.running.isEmpty else { return nil }
            let idle = state.idle ?? LifecycleEvent()
            state.idle = idle
            return idle
        }
        guard let idle else { return }
        // The calling task is cancelled (stopping), so its own waits would end at once: wait in
        // one that is not.
        await Task { await Self.wait(for: idle, until: deadline) }.value
    }

    private static func register<Value: Sendable>(
        _ state: inout State, _ work: @escaping @Sendable () async throws -> Value, finished: @escaping @Sendable (UInt64) -> Void
    ) -> (Task<Value, any Error>, cancelNow: Bool) {
        state.nextId += 1
        let id = state.nextId
        // Registered under the lock it was created in, so `finished` always finds it.
        let task = Task {
            defer { finished(id) }
            return try await work()
        }
        state.running[id] = { task.cancel() }
        return (task, state.graceOver)
    }

    private func finished(_ id: UInt64) {
        state.withLock { state in
            state.running[id] = nil
            guard state.running.isEmpty else { return }
            state.idle?.signal()
            state.idle = nil
        }
    }

    private static func wait(for event: LifecycleEvent, until deadline: ContinuousClock.Instant) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await event.signalled() }
            group.addTask { try? await Task.sleep(until: deadline, clock: .continuous) }
            await group.next()
            group.cancelAll()
        }
    }
}
