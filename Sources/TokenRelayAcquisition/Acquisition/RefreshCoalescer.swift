import Foundation
import Synchronization
import TokenRelayBase

/// Joins concurrent refreshes of the same (account, scopes, claims) into one STS call per
/// process (behaviour §2.6): the first caller starts the work, later callers await its result.
package final class RefreshCoalescer<Value: Sendable>: Sendable {
    package init() {}

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
        let (task, joined) = inFlight.withLock { tasks -> (Task<Value, any Error>, Bool) in
            if let running = tasks[key] { return (running, true) }
            let task = Task { try await work() }
            tasks[key] = task
            return (task, false)
        }
        if !joined {
            // Forget the task once it ends, whoever awaits it, so the next refresh starts fresh.
            Task { [weak self] in
                _ = await task.result
                _ = self?.inFlight.withLock { $0.removeValue(forKey: key) }
            }
        }
        guard let deadline else { return (try await task.value, joined) }
        guard let value = try await Self.value(of: task, until: deadline) else { throw RelayError.deadlinePassed(before: "sts") }
        return (value, joined)
    }

    /// `task`'s value, or nil at `deadline` if it has not ended by then (it runs on). Not a task
    /// group racing a timer: awaiting a `Task`'s value does not end when the awaiting child is
    /// cancelled, and a group waits for all its children, so the caller would wait for the whole
    /// STS call and get its 504 only then.
    private static func value(of task: Task<Value, any Error>, until deadline: Date) async throws -> Value? {
        let race = FirstResult<Value?>()
        return try await withCheckedThrowingContinuation { continuation in
            race.start(continuation)
            let timer = Task {
                let seconds = deadline.timeIntervalSinceNow
                if seconds > 0 { try? await Task.sleep(for: .milliseconds(Int((seconds * 1000).rounded(.up)))) }
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
