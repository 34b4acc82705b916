public import HTTPCommon

/// What ``HTTPHandler/respondImmediately(to:)`` decided on the server's own thread.
public enum HTTPFirstStep<Prepared: Sendable>: Sendable {
    /// Send this response now, without suspending the connection.
    case respond(HTTPResponse)
    /// Suspend the connection and continue with ``HTTPHandler/respond(to:)`` from this value
    /// (the request as far as the first step got with it), so no work is done twice.
    case suspend(Prepared)
}

/// A request the server refuses on its head, before any of its body is read (RFC 9112 §2.2,
/// §5.2, §6.1, §6.3; RFC 9110 §5.5, §10.1.1): the answer is sent with `Connection: close`.
public struct HTTPHeadRefusal: Sendable, Equatable {
    /// 400, 501 (a transfer coding other than `chunked`) or 417 (an expectation other than `100-continue`).
    public var status: Int
    /// The header field at fault, when one is (`Transfer-Encoding`, `Expect`, the field whose line
    /// is not framed as it must be); nil for the request line.
    public var field: String?
    /// One sentence for the caller.
    public var reason: String

    public init(status: Int, field: String?, reason: String) {
        self.status = status
        self.field = field
        self.reason = reason
    }
}

/// What ``HTTPHandler/admitHead(_:)`` decided about a request that waits for `100 Continue`.
public enum HTTPHeadStep: Sendable {
    /// Invite the body (`100 Continue`) and read it.
    case proceed
    /// Answer now, without reading the body; the connection is closed afterwards.
    case respond(HTTPResponse)
    /// Decide off the server thread (e.g. ask the database about the API key): nil proceeds,
    /// a response is sent without reading the body.
    case suspend(@Sendable () async -> HTTPResponse?)
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
    /// - Parameter request: The complete request, handed over (a handler that keeps it in what it
    ///   prepares takes it without a copy of its every field).
    /// - Returns: The response, or the prepared request to continue with in ``respond(to:)``.
    func respondImmediately(to request: consuming HTTPRequest) -> HTTPFirstStep<Prepared>

    /// Answers asynchronously, called in a Swift `Task` after the connection was suspended.
    ///
    /// The server resumes the connection and sends the response when this returns. If the server
    /// stops meanwhile, the response is dropped and the connection closed.
    /// - Parameter prepared: What ``respondImmediately(to:)`` handed on.
    /// - Returns: The response to send.
    func respond(to prepared: Prepared) async -> HTTPResponse

    /// The answer to a request refused on its head (framing, expectations); the server adds
    /// `Connection: close`. By default a plain-text answer with the refusal's status.
    func refused(_ refusal: HTTPHeadRefusal, request: HTTPRequest) -> HTTPResponse

    /// Called on the server thread with the head of a request that asks for `100 Continue`
    /// (HTTP/1.1, `Expect: 100-continue`), before the client is invited to send its body: the
    /// body is invited only on ``HTTPHeadStep/proceed``. `request.body` is empty. By default
    /// every head proceeds.
    func admitHead(_ request: HTTPRequest) -> HTTPHeadStep
}

extension HTTPHandler {
    public func refused(_ refusal: HTTPHeadRefusal, request: HTTPRequest) -> HTTPResponse {
        HTTPResponse(status: refusal.status, headers: ["Content-Type": "text/plain; charset=utf-8"], body: Array((refusal.reason + "\n").utf8))
    }

    public func admitHead(_ request: HTTPRequest) -> HTTPHeadStep { .proceed }
}

/// A handler with its associated type erased, as the C callbacks need it: the first step, and
/// for a suspended request the rest of the work as one closure.
///
/// Made where the handler's type is known (``HTTPServer/init(configuration:handler:)`` is
/// inlinable): release builds serialise only public and inlinable code into other modules, so made
/// in this module the closures ran unspecialised and instantiated `HTTPFirstStep<Prepared>`'s
/// metadata at run time on every request (behaviour §10).
@usableFromInline
struct ErasedHandler: Sendable {
    @usableFromInline
    enum Step {
        case respond(HTTPResponse)
        case suspend(@Sendable () async -> HTTPResponse)
    }

    @usableFromInline let first: @Sendable (consuming HTTPRequest) -> Step
    @usableFromInline let refused: @Sendable (HTTPHeadRefusal, HTTPRequest) -> HTTPResponse
    @usableFromInline let admitHead: @Sendable (HTTPRequest) -> HTTPHeadStep

    @inlinable
    init<Handler: HTTPHandler>(_ handler: Handler) {
        refused = { handler.refused($0, request: $1) }
        admitHead = { handler.admitHead($0) }
        first = { request in
            switch handler.respondImmediately(to: consume request) {
            case .respond(let response): return .respond(response)
            case .suspend(let prepared): return .suspend({ await handler.respond(to: prepared) })
            }
        }
    }
}
