public import HTTPCommon

/// What ``HTTPHandler/respondImmediately(to:)`` decided on the server's own thread.
public enum HTTPFirstStep<Prepared: Sendable>: Sendable {
    /// Send this response now, without suspending the connection.
    case respond(HTTPResponse)
    /// Suspend the connection and continue with ``HTTPHandler/respond(to:)`` from this value
    /// (the request as far as the first step got with it), so no work is done twice.
    case suspend(Prepared)
}

/// What the server calls for every complete request.
///
/// The server reads the whole request (up to ``HTTPServerConfiguration/maxBodyBytes``) before
/// calling the handler. It first calls ``respondImmediately(to:)`` on its own polling thread;
/// only when that answers ``HTTPFirstStep/suspend(_:)`` does it park the connection
/// (`MHD_suspend_connection`) and call ``respond(to:)`` with the prepared value in a Swift
/// `Task`, so a request that waits on the network or the database holds no thread.
public protocol HTTPHandler: Sendable {
    /// What the first step hands to the second: at least the request itself.
    associatedtype Prepared: Sendable

    /// Prepares the request on the server's own thread and answers it there when it can.
    ///
    /// Meant for memory-only work (a cache hit, `/healthz`, refusals that need no I/O). It must
    /// not block: while it runs, every other connection of that server thread waits.
    /// - Parameter request: The complete request.
    /// - Returns: The response, or the prepared request to continue with in ``respond(to:)``.
    func respondImmediately(to request: HTTPRequest) -> HTTPFirstStep<Prepared>

    /// Answers asynchronously, called in a Swift `Task` after the connection was suspended.
    ///
    /// The server resumes the connection and sends the response when this returns. If the server
    /// stops meanwhile, the response is dropped and the connection closed.
    /// - Parameter prepared: What ``respondImmediately(to:)`` handed on.
    /// - Returns: The response to send.
    func respond(to prepared: Prepared) async -> HTTPResponse
}

/// A handler with its associated type erased, as the C callbacks need it: the first step, and
/// for a suspended request the rest of the work as one closure.
struct ErasedHandler: Sendable {
    enum Step {
        case respond(HTTPResponse)
        case suspend(@Sendable () async -> HTTPResponse)
    }

    let first: @Sendable (HTTPRequest) -> Step

    init<Handler: HTTPHandler>(_ handler: Handler) {
        first = { request in
            switch handler.respondImmediately(to: request) {
            case .respond(let response): return .respond(response)
            case .suspend(let prepared): return .suspend({ await handler.respond(to: prepared) })
            }
        }
    }
}
