import Foundation
import Synchronization
import TokenRelayBase
import TokenRelayUpstream

/// Joins concurrent refreshes of the same (account, scopes, claims) into one STS call per
/// process (behaviour §2.6): the first caller starts the work, later callers await its result.
/// The work runs in a task of `tasks`, so it outlives a caller that stopped waiting but not a
/// shutdown's grace.
package final class RefreshCoalescer<Value: Sendable>: Sendable {
    package let tasks: BackgroundTasks
    /// The waiting clock (``UpstreamClock``) a caller's deadline is read on.
    private let clock: UpstreamClock

    package init(tasks: BackgroundTasks, clock: UpstreamClock = .system) {
        self.tasks = tasks
        self.clock = clock
    }

    private let inFlight = Mutex<[String: Task<Value, any Error>]>([:])

    /// Whether a call with `key` is in flight.
    package func isRunning(_ key: String) -> Bool {
        inFlight.withLock { $0[key] != nil }
    }

    /// Runs `work` unless a call with `key` is running; returns its result either way.
    /// - Parameter deadline: when given, this caller stops waiting then (504 `upstream_unavailable`)
    ///   while `work` runs on to its end, so what it stores (a rotated refresh token) is not lost.
    /// - Returns: the value, and whether this call joined one already in flight.
    package func run(key: String, until deadline: Date? = nil, _ work: @escaping @Sendable () async throws -> Value) async throws -> (
        value: Value, joined: Bool
    ) {
        let (task, joined) = inFlight.withLock { inFlight -> (Task<Value, any Error>, Bool) in
            if let running = inFlight[key] { return (running, true) }
            // Forgotten once it ends, whoever awaits it, so the next refresh starts fresh; it
            // cannot end before it is recorded: that waits for this lock.
            let task = tasks.task { [weak self] in
                defer { _ = self?.inFlight.withLock { $0.removeValue(forKey: key) } }
                return try await work()
            }
            inFlight[key] = task
            return (task, false)
        }
        guard let deadline else { return (try await task.value, joined) }
        guard let value = try await Self.value(of: task, until: deadline, clock: clock) else { throw RelayError.deadlinePassed(before: "sts") }
        return (value, joined)
    }

    /// `task`'s value, or nil at `deadline` if it has not ended by then (it runs on). Its timer
    /// and watcher are this caller's wait, ending with the work or the deadline, so no service
    /// owns them. Not a task
    /// group racing a timer: awaiting a `Task`'s value does not end when the awaiting child is
    /// cancelled, and a group waits for all its children, so the caller would wait for the whole
    /// STS call and get its 504 only then.
    private static func value(of task: Task<Value, any Error>, until deadline: Date, clock: UpstreamClock) async throws -> Value? {
        let race = FirstResult<Value?>()
        return try await withCheckedThrowingContinuation { continuation in
            race.start(continuation)
            let timer = Task {
                let seconds = deadline.timeIntervalSince(clock.now())
                if seconds > 0 { await clock.sleep(seconds) }
                // Cancelled: the work ended first.
                if !Task.isCancelled { race.finish(.success(nil)) }
            }
            Task {
                let result = await task.result
                race.finish(result.map { Optional($0) })
                timer.cancel()
            }
        }
    }
}

/// Resumes a continuation with the first result it is given; later ones are dropped.
private final class FirstResult<Value: Sendable>: Sendable {
    private let continuation = Mutex<CheckedContinuation<Value, any Error>?>(nil)

    /// Called before the racers start.
    func start(_ continuation: CheckedContinuation<Value, any Error>) {
        self.continuation.withLock { $0 = continuation }
    }

    func finish(_ result: Result<Value, any Error>) {
        let waiting = continuation.withLock { current -> CheckedContinuation<Value, any Error>? in
            defer { current = nil }
            return current
        }
        waiting?.resume(with: result)
    }
}
