internal import CMicroHTTPD
internal import Glibc
import HTTPCommon
import Synchronization

/// The part of an ``HTTPServer`` libmicrohttpd's callbacks reach through their context pointer:
/// the handler, the limits, and the registry of suspended connections.
///
/// The registry is what makes `stop()` safe while async handlers run: MHD panics if the daemon
/// stops with a connection still suspended, and a connection must not be resumed after the
/// daemon freed it. So a connection is resumed either by its Task or by `stop()`, whichever takes
/// it out of the registry first, and always under the registry's lock.
final class ServerCore: Sendable {
    struct State {
        var daemon: OpaquePointer?
        var port = 0
        var wasStarted = false
        var isStopping = false
        var suspended: [ObjectIdentifier: RequestContext] = [:]
    }

    /// Requests begun (headers read) and not yet completed: what a graceful stop waits for. An
    /// atomic count, not under `state`'s lock: two lock round trips per request cost more.
    let active = Atomic<Int>(0)

    let handler: ErasedHandler
    let maxBodyBytes: Int
    /// Present when a request head has a deadline (``HTTPServerConfiguration/requestHeadTimeoutSeconds``).
    let headDeadlines: RequestHeadDeadlines?
    let state = Mutex(State())

    /// Most query parameters a request target may hold (``HTTPServerConfiguration/maxQueryParameters``).
    let maxQueryParameters: Int

    init(handler: ErasedHandler, maxBodyBytes: Int, requestHeadTimeoutSeconds: Int = 0, maxQueryParameters: Int = 100) {
        self.handler = handler
        self.maxQueryParameters = maxQueryParameters
        self.maxBodyBytes = maxBodyBytes
        headDeadlines = requestHeadTimeoutSeconds > 0 ? RequestHeadDeadlines(seconds: requestHeadTimeoutSeconds) : nil
    }

    /// Suspends the connection and runs the async handler in a Task. Called on the polling
    /// thread, inside the access handler.
    /// - Returns: false when the server is stopping (nothing was suspended).
    func suspend(_ context: RequestContext, continuing respond: @escaping @Sendable () async -> HTTPResponse) -> Bool {
        suspend(context) { .respond(await respond()) }
    }

    /// Suspends the connection and runs `work` in a Task; the connection comes back with its outcome.
    /// - Returns: false when the server is stopping (nothing was suspended).
    func suspend(_ context: RequestContext, deciding work: @escaping @Sendable () async -> RequestContext.Outcome) -> Bool {
        // Set first: once suspended, the Task may resume the connection at any moment (MHD only
        // acts on that after this access-handler call returns, on this same thread).
        context.isSuspended = true
        let suspended = state.withLock { state -> Bool in
            guard !state.isStopping else { return false }
            state.suspended[ObjectIdentifier(context)] = context
            MHD_suspend_connection(context.connection)
            return true
        }
        guard suspended else {
            context.isSuspended = false
            return false
        }
        Task { [self] in
            resume(context, with: await work())
        }
        return true
    }

    /// Hands the outcome to the polling thread and resumes the connection, unless `stop()`
    /// already took it.
    func resume(_ context: RequestContext, with outcome: RequestContext.Outcome) {
        context.outcome.withLock { $0 = outcome }
        state.withLock { state in
            guard state.suspended.removeValue(forKey: ObjectIdentifier(context)) != nil else { return }
            MHD_resume_connection(context.connection)
        }
    }

    /// Marks the server as stopping, resumes every suspended connection with `.close`, and gives
    /// back the daemon to stop (nil if it is not running).
    func beginStop() -> OpaquePointer? {
        state.withLock { state in
            state.isStopping = true
            for context in state.suspended.values {
                context.outcome.withLock { $0 = .close }
                MHD_resume_connection(context.connection)
            }
            state.suspended.removeAll()
            defer { state.daemon = nil }
            return state.daemon
        }
    }
}
