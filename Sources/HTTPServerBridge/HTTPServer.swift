internal import CMicroHTTPD
internal import Glibc
import HTTPCommon

/// An HTTP/1.1 server on libmicrohttpd: a pool of epoll polling threads reads requests and calls
/// an ``HTTPHandler``.
///
/// Answers the handler gives at once (``HTTPHandler/respondImmediately(to:)``) are sent from the
/// polling thread; others suspend the connection (`MHD_suspend_connection`) while
/// ``HTTPHandler/respond(to:)`` runs in a Task, so waiting requests hold no thread. Keep-alive,
/// `Expect: 100-continue`, HEAD and `Content-Length` are libmicrohttpd's. No TLS: terminate it in
/// front.
public final class HTTPServer: Sendable {
    /// The configuration the server was created with.
    public let configuration: HTTPServerConfiguration
    private let core: ServerCore

    /// Creates a stopped server.
    /// - Parameters:
    ///   - configuration: Address, port, threads and limits.
    ///   - handler: Called for every complete request.
    @inlinable
    public convenience init(configuration: HTTPServerConfiguration, handler: some HTTPHandler) {
        self.init(configuration: configuration, erasedHandler: ErasedHandler(handler))
    }

    @usableFromInline
    init(configuration: HTTPServerConfiguration, erasedHandler handler: ErasedHandler) {
        self.configuration = configuration
        self.core = ServerCore(
            handler: handler, maxBodyBytes: configuration.maxBodyBytes, requestHeadTimeoutSeconds: configuration.requestHeadTimeoutSeconds,
            maxQueryParameters: configuration.maxQueryParameters)
    }

    deinit { stop() }

    /// Binds the address and starts the polling threads; returns once the server accepts
    /// connections.
    /// - Throws: ``HTTPServerError``: invalid configuration, already started (a server starts at
    ///   most once), or `MHD_start_daemon` failing, e.g. with `isAddressInUse` when the port is
    ///   taken.
    public func start() throws {
        let config = configuration
        guard let address = SocketAddress(host: config.host, port: config.port) else {
            throw HTTPServerError.invalidConfiguration("host \(config.host) port \(config.port) is not a numeric address and port")
        }
        guard config.threadCount >= 1, config.maxBodyBytes >= 0, config.maxConnections >= 1,
            config.connectionTimeoutSeconds >= 0, config.connectionMemoryLimitBytes >= 4096, config.requestHeadTimeoutSeconds >= 0
        else {
            throw HTTPServerError.invalidConfiguration("threadCount and maxConnections must be ≥ 1, connection memory ≥ 4096 bytes, limits ≥ 0")
        }
        var flags =
            MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_EPOLL.rawValue
            | MHD_ALLOW_SUSPEND_RESUME.rawValue | MHD_USE_TURBO.rawValue
            // An inter-thread channel: MHD_quiesce_daemon needs it with internal polling threads.
            | MHD_USE_ITC.rawValue
        if address.isIPv6 { flags |= MHD_USE_IPv6.rawValue }

        try core.state.withLock { state in
            guard !state.wasStarted else { throw HTTPServerError.alreadyStarted }
            errno = 0
            // Unretained: `self` owns `core` and stops the daemon (its only user) in deinit.
            let context = Unmanaged.passUnretained(core).toOpaque()
            let daemon = address.withSockAddr { sockaddr in
                cmhd_start_daemon(
                    flags, sockaddr, UInt32(config.threadCount), UInt32(config.maxConnections),
                    UInt32(config.connectionTimeoutSeconds), config.connectionMemoryLimitBytes, accessHandler, context, requestCompleted,
                    context, connectionNotified, context, percentDecode, readTarget, context, Int32(config.strictForClient))
            }
            guard let daemon else {
                throw HTTPServerError.cFunctionFailed("MHD_start_daemon", errno: errno, address: "\(config.host):\(config.port)")
            }
            state.daemon = daemon
            state.wasStarted = true
            state.port = Int(cmhd_daemon_bind_port(daemon))
        }
        core.headDeadlines?.start()
    }

    /// The bound TCP port after ``start()`` (the kernel's pick when the configuration said 0);
    /// 0 before; the last bound port after ``stop()``.
    public var port: Int { core.state.withLock { $0.port } }

    /// Graceful stop, first half: stops accepting new connections (`MHD_quiesce_daemon`; the
    /// listening socket is closed, so connecting is refused) and waits until every request
    /// already begun has been answered, or `timeoutSeconds` passed. Call ``stop()`` afterwards.
    /// - Parameter timeoutSeconds: the longest wait, seconds.
    /// - Returns: true when no request was left in flight.
    @discardableResult
    public func drain(timeoutSeconds: Double) -> Bool {
        guard let daemon = core.state.withLock({ $0.daemon }) else { return true }
        let listening = MHD_quiesce_daemon(daemon)
        if listening >= 0 { close(listening) }
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .milliseconds(Int(max(0, timeoutSeconds) * 1000)))
        while core.active.load(ordering: .relaxed) > 0 {
            guard clock.now < deadline else { return false }
            usleep(20_000)
        }
        return true
    }

    /// Stops accepting, closes every connection and joins the polling threads. Requests whose
    /// async handler is still running are closed unanswered; their handlers finish but their
    /// responses are dropped. Idempotent; also called from `deinit`. Must not be called from a
    /// handler's `respondImmediately`, which runs on a polling thread.
    public func stop() {
        core.headDeadlines?.stop()
        guard let daemon = core.beginStop() else { return }
        MHD_stop_daemon(daemon)
    }
}
