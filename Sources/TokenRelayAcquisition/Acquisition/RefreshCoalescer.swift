import Foundation
import Synchronization
import TokenRelayBase
import TokenRelayUpstream

/// Joins concurrent refreshes of the same (account, scopes, claims) into one STS call per
/// process (behaviour §2.6): the first caller starts the work, later callers await its result.
/// The work runs in a task of `tasks`, so it outlives a caller that stopped waiting but not a
/// shutdown's grace.
///
/// Its callers wait on continuations the work's task resumes itself when it ends: one hand-off
/// from the work to each caller, no task in between (issue 30). A caller's deadline is a timer
/// of ``UpstreamClock/schedule(after:_:)``, cancelled when the work ends first.
package final class RefreshCoalescer<Value: Sendable>: Sendable {
    package let tasks: BackgroundTasks
    /// The waiting clock (``UpstreamClock``) a caller's deadline is read on.
    private let clock: UpstreamClock

    package init(tasks: BackgroundTasks, clock: UpstreamClock = .system) {
        self.tasks = tasks
        self.clock = clock
    }

    /// A caller waiting for a run: resumed by the run's end or by its own deadline, whichever
    /// takes it out of ``Flight/waiters`` first.
    private struct Waiter {
        let continuation: CheckedContinuation<Value, any Error>
        var deadline: ScheduledAction?
    }

    /// One run of work under a key, and who waits for it.
    private struct Flight {
        var waiters: [UInt64: Waiter] = [:]
    }

    private struct State {
        var flights: [String: Flight] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = Mutex(State())

    /// Whether a call with `key` is in flight.
    package func isRunning(_ key: String) -> Bool {
        state.withLock { $0.flights[key] != nil }
    }

    /// Runs `work` unless a call with `key` is running; returns its result either way.
    /// - Parameter deadline: when given, this caller stops waiting then (504 `upstream_unavailable`)
    ///   while `work` runs on to its end, so what it stores (a rotated refresh token) is not lost.
    /// - Returns: the value, and whether this call joined one already in flight.
    package func run(key: String, until deadline: Date? = nil, _ work: @escaping @Sendable () async throws -> Value) async throws -> (
        value: Value, joined: Bool
    ) {
        var joined = false
        let value = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
            let (id, startsWork) = state.withLock { state -> (UInt64, Bool) in
                state.nextWaiter &+= 1
                let id = state.nextWaiter
                let startsWork = state.flights[key] == nil
                state.flights[key, default: Flight()].waiters[id] = Waiter(continuation: continuation)
                return (id, startsWork)
            }
            joined = !startsWork
            if startsWork {
                // Forgotten once it ends, whoever waits for it, so the next refresh starts fresh.
                tasks.task { [self] in
                    let result: Result<Value, any Error>
                    do { result = .success(try await work()) } catch { result = .failure(error) }
                    finish(key, with: result)
                }
            }
            guard let deadline else { return }
            let timer = clock.schedule(after: deadline.timeIntervalSince(clock.now())) { [self] in giveUp(key, waiter: id) }
            // The run may have ended meanwhile: then this caller was resumed, and the timer goes.
            let armed = state.withLock { state -> Bool in
                guard state.flights[key]?.waiters[id] != nil else { return false }
                state.flights[key]?.waiters[id]?.deadline = timer
                return true
            }
            if !armed { timer.cancel() }
        }
        return (value, joined)
    }

    /// The run under `key` ended: every caller still waiting gets `result`.
    private func finish(_ key: String, with result: Result<Value, any Error>) {
        let waiters = state.withLock { $0.flights.removeValue(forKey: key)?.waiters.values }
        for waiter in waiters ?? [:].values {
            waiter.deadline?.cancel()
            waiter.continuation.resume(with: result)
        }
    }

    /// The caller `waiter` of the run under `key` reached its deadline first: it stops waiting.
    private func giveUp(_ key: String, waiter id: UInt64) {
        let waiter = state.withLock { $0.flights[key]?.waiters.removeValue(forKey: id) }
        waiter?.continuation.resume(throwing: RelayError.deadlinePassed(before: "sts"))
    }
}
