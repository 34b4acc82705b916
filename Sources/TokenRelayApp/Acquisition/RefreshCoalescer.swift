import Foundation
import Synchronization

/// Joins concurrent refreshes of the same (account, scopes, claims) into one STS call per
/// process (SPEC §2 step 3): the first caller starts the work, later callers await its result.
final class RefreshCoalescer<Value: Sendable>: Sendable {
    private let inFlight = Mutex<[String: Task<Value, any Error>]>([:])

    /// Whether a call with `key` is in flight.
    func isRunning(_ key: String) -> Bool {
        inFlight.withLock { $0[key] != nil }
    }

    /// Runs `work` unless a call with `key` is running; returns its result either way.
    /// - Parameter deadline: when given, this caller stops waiting then (504 `upstream_unavailable`)
    ///   while `work` runs on to its end, so what it stores (a rotated refresh token) is not lost.
    /// - Returns: the value, and whether this call joined one already in flight.
    func run(key: String, until deadline: Date? = nil, _ work: @escaping @Sendable () async throws -> Value) async throws -> (
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
        let value = try await withThrowingTaskGroup(of: Value?.self) { group -> Value? in
            group.addTask { try await task.value }
            group.addTask {
                let seconds = deadline.timeIntervalSinceNow
                if seconds > 0 { try await Task.sleep(for: .milliseconds(Int(seconds * 1000))) }
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        guard let value else { throw Problem.deadlinePassed(before: "sts") }
        return (value, joined)
    }
}
