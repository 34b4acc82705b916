import Dispatch
import Foundation
import Synchronization

/// A fixed set of PostgreSQL connections, each owned by a worker thread of its own.
///
/// libpq calls block, so they never run in Swift concurrency's task pool (as wide as the core
/// count): `withConnection` queues a job and suspends without holding a thread until a worker
/// has run it. Connections are made lazily, on a worker's first job; a broken one (server
/// restarted, backend terminated, network lost) is replaced on its next use, so the service
/// recovers by itself when the database comes back (behaviour §5).
public final class PostgresPool: Sendable {
    /// The most connections the pool holds.
    public let size: Int
    private let shared: Shared

    /// Creates the pool and starts its `size` worker threads; connects nothing yet.
    /// - Parameters:
    ///   - url: a libpq conninfo string or `postgresql://` URL. `connect_timeout` defaults to 5
    ///     seconds and `application_name` to `tokenrelay` when the URL sets neither.
    ///   - size: connections and worker threads (at least 1).
    public init(url: String, size: Int) {
        self.size = max(1, size)
        shared = Shared(size: self.size)
        for index in 0..<self.size {
            let shared = shared
            let thread = Thread {
                Self.work(shared: shared, url: url)
                // The connection is finished (PQfinish) by now: close() may let the process exit.
                shared.workerExited.signal()
            }
            thread.start()
            // After start(): Foundation on Linux gives a name set before it to no thread (`top -H`,
            // /proc/…/comm, bench/storm's switches by thread).
            thread.name = "postgres-\(index)"
        }
    }

    deinit {
        stop()
    }

    /// A worker's life: its connection exists only inside, so it is finished when this returns.
    private static func work(shared: Shared, url: String) {
        let connection = PostgresConnection(url: url)
        shared.runJobs(on: connection)
    }

    /// Runs `body` on a pool worker thread holding one connection, waiting (suspended, no thread
    /// held) for a free worker first.
    ///
    /// Before `body` runs, the connection is connected or replaced if broken, and any transaction
    /// a previous body left open is rolled back. Cancelling the calling task does not withdraw a
    /// queued job.
    /// - Parameter body: the blocking work; it must not keep the connection.
    /// - Returns: what `body` returns.
    /// - Throws: ``PostgresError`` (`isConnectionFailure` when the database is unreachable,
    ///   `poolClosed` after ``close()``), or what `body` throws.
    public func withConnection<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) throws -> T
    ) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
            let job = Job(
                run: { connection in
                    let result = Result {
                        try connection.prepareForUse()
                        return try body(connection)
                    }
                    return { continuation.resume(with: result) }
                },
                cancel: { error in continuation.resume(throwing: error) })
            shared.enqueue(job)
        }
    }

    /// Current size, busy workers and queued jobs.
    public var statistics: PostgresPoolStatistics {
        shared.state.withLock { state in
            PostgresPoolStatistics(size: size, inUse: state.inUse, waiting: state.jobs.count, totalWaits: state.totalWaits)
        }
    }

    /// Fails queued jobs with `poolClosed`, lets running ones finish, then stops the workers,
    /// which close their connections. Later `withConnection` calls throw `poolClosed`.
    public func close() {
        guard stop() else { return }
        // Wait for the workers: a job in flight finishes and every connection is finished before
        // the caller goes on. A command-line tool returns to exit() next, and libpq tearing a
        // connection down on a worker while exit() runs libcrypto's cleanup crashed `token-relay
        // encryption rotate` once on CI ("double free or corruption", exit by SIGABRT). Bounded,
        // so a statement that never ends cannot hold a shutdown forever.
        let deadline = DispatchTime.now() + .seconds(Self.closeWaitSeconds)
        for _ in 0..<size where shared.workerExited.wait(timeout: deadline) == .timedOut { break }
    }

    /// The longest ``close()`` waits for jobs in flight.
    public static let closeWaitSeconds = 10

    /// Refuses new jobs, cancels queued ones and wakes every worker to exit.
    /// - Returns: whether this call closed the pool (false when it already was).
    @discardableResult
    private func stop() -> Bool {
        let dropped = shared.state.withLock { state -> [Job]? in
            guard !state.closed else { return nil }
            state.closed = true
            defer { state.jobs.removeAll() }
            return state.jobs
        }
        guard let dropped else { return false }
        let error = PostgresError(code: .poolClosed, function: "PostgresPool.close")
        for job in dropped { job.cancel(error) }
        // Wake every worker: each finds the queue empty and the pool closed, and exits.
        for _ in 0..<size { shared.jobsAvailable.signal() }
        return true
    }
}

extension PostgresPool {
    /// One queued `withConnection` call.
    struct Job: Sendable {
        /// Runs on a worker thread with its connection; returns what resumes the caller, so the
        /// worker can count itself free first (statistics then never lag behind the caller).
        let run: @Sendable (PostgresConnection) -> @Sendable () -> Void
        /// Resumes the caller with an error without running (pool closed).
        let cancel: @Sendable (PostgresError) -> Void
    }

    struct State: Sendable {
        var jobs: [Job] = []
        var inUse = 0
        var closed = false
        var totalWaits = 0
        let size: Int
    }

    /// What the pool and its worker threads share: the job queue behind a mutex, and a semaphore
    /// counting queued jobs (plus one wake-up per worker at close).
    final class Shared: Sendable {
        let state: Mutex<State>
        let jobsAvailable = DispatchSemaphore(value: 0)
        /// Signalled by each worker once it has exited and finished its connection.
        let workerExited = DispatchSemaphore(value: 0)

        init(size: Int) {
            state = Mutex(State(size: size))
        }

        func enqueue(_ job: Job) {
            let accepted = state.withLock { state -> Bool in
                guard !state.closed else { return false }
                if state.inUse + state.jobs.count >= state.size { state.totalWaits += 1 }
                state.jobs.append(job)
                return true
            }
            if accepted {
                jobsAvailable.signal()
            } else {
                job.cancel(PostgresError(code: .poolClosed, function: "PostgresPool.withConnection"))
            }
        }

        /// A worker thread's loop: blocks for a job, runs it, until the pool closes.
        func runJobs(on connection: PostgresConnection) {
            while true {
                jobsAvailable.wait()
                let next = state.withLock { state -> Job? in
                    guard !state.jobs.isEmpty else { return nil }
                    state.inUse += 1
                    return state.jobs.removeFirst()
                }
                // Signals come only with a job or from close(): an empty queue means closed.
                guard let job = next else { return }
                let resumeCaller = job.run(connection)
                state.withLock { $0.inUse -= 1 }
                resumeCaller()
            }
        }
    }
}
