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
    /// - Returns: the value, and whether this call joined one already in flight.
    func run(key: String, _ work: @escaping @Sendable () async throws -> Value) async throws -> (value: Value, joined: Bool) {
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
        return (try await task.value, joined)
    }
}
