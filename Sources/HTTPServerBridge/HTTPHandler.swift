public import HTTPCommon

/// What the server calls for every complete request.
///
/// The server reads the whole request (up to ``HTTPServerConfiguration/maxBodyBytes``) before
/// calling the handler. It first tries ``respondImmediately(to:)`` on its own polling thread;
/// only when that returns nil does it park the connection (`MHD_suspend_connection`) and call
/// ``respond(to:)`` in a Swift `Task`, so a request that waits on the network or the database
/// holds no thread.
public protocol HTTPHandler: Sendable {
    /// Answers at once on the server's own thread, without suspending the connection.
    ///
    /// Meant for memory-only fast paths (a cache hit, `/healthz`). It must not block: while it
    /// runs, every other connection of that server thread waits.
    /// - Parameter request: The complete request.
    /// - Returns: The response, or nil to answer asynchronously through ``respond(to:)``.
    func respondImmediately(to request: HTTPRequest) -> HTTPResponse?

    /// Answers asynchronously, called in a Swift `Task` after the connection was suspended.
    ///
    /// The server resumes the connection and sends the response when this returns. If the server
    /// stops meanwhile, the response is dropped and the connection closed.
    /// - Parameter request: The complete request (the same value ``respondImmediately(to:)`` saw).
    /// - Returns: The response to send.
    func respond(to request: HTTPRequest) async -> HTTPResponse
}
