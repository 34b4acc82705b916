import Foundation
import HTTPServerBridge
import Synchronization
import TokenRelayBase

/// Serves HTTP until stopped, then stops gracefully: stops accepting (`MHD_quiesce_daemon`: new
/// connections are refused), lets requests in flight finish for up to `drainTimeoutSeconds`
/// (`TOKENRELAY_SHUTDOWN_TIMEOUT_S`), then closes every connection.
package final class HTTPServerService: Service {
    package let name: String
    private let server: HTTPServer
    private let drainTimeoutSeconds: Int
    private let logger: Logger
    private let onListening: @Sendable (Int) -> Void
    private let drainResult = Mutex<Bool?>(nil)

    /// - Parameters:
    ///   - drainTimeoutSeconds: the longest wait for requests in flight at stop, seconds.
    ///   - onListening: called with the bound port once connections are accepted.
    package init(
        name: String = "HTTPServer", server: HTTPServer, drainTimeoutSeconds: Int, logger: Logger, onListening: @escaping @Sendable (Int) -> Void
    ) {
        self.name = name
        self.server = server
        self.drainTimeoutSeconds = drainTimeoutSeconds
        self.logger = logger
        self.onListening = onListening
    }

    /// Whether every request in flight at stop finished in time; nil before a stop.
    package var drained: Bool? { drainResult.withLock { $0 } }

    /// - Throws: `HTTPServerError` when the server cannot start (e.g. the port is taken).
    package func run() async throws {
        try server.start()
        onListening(server.port)
        await Lifecycle.untilCancelled()
        logger.info("service.stopping", ["shutdown.timeout_s": String(drainTimeoutSeconds)])
        let (server, timeout) = (self.server, Double(drainTimeoutSeconds))
        // The drain polls for up to the timeout: off the cooperative pool, whose threads the
        // requests in flight need to finish.
        let drained = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            DispatchQueue.global().async { continuation.resume(returning: server.drain(timeoutSeconds: timeout)) }
        }
        drainResult.withLock { $0 = drained }
        server.stop()
    }
}
