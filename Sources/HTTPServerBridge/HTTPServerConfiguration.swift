/// How an ``HTTPServer`` listens and what it accepts.
public struct HTTPServerConfiguration: Sendable {
    /// Numeric address to bind: `127.0.0.1` (default), `0.0.0.0` (every IPv4 interface), `::1`,
    /// `::`, or `localhost` (taken as `127.0.0.1`).
    public var host: String
    /// TCP port to bind; 0 lets the kernel pick one (read ``HTTPServer/port`` after `start()`).
    /// Default 8080.
    public var port: Int
    /// Number of libmicrohttpd polling threads (`MHD_OPTION_THREAD_POOL_SIZE`). Default 2, one per
    /// core of the reference machine; 1 means a single internal polling thread.
    public var threadCount: Int
    /// Largest request body kept, in bytes. Default 65536 (behaviour §7). A larger body is read and
    /// discarded, and the handler sees `bodyExceededLimit == true` with an empty body.
    public var maxBodyBytes: Int
    /// Most connections open at once (`MHD_OPTION_CONNECTION_LIMIT`); further ones are refused.
    /// Default 4096.
    public var maxConnections: Int
    /// Seconds a connection may stay idle (e.g. between keep-alive requests) before the server
    /// closes it (`MHD_OPTION_CONNECTION_TIMEOUT`). Default 60; 0 means never. A suspended
    /// connection (waiting on ``HTTPHandler/respond(to:)``) does not time out.
    public var connectionTimeoutSeconds: Int
    /// Memory each connection may use for the request line, headers and read buffer
    /// (`MHD_OPTION_CONNECTION_MEMORY_LIMIT`), in bytes. Default 24576.
    /// A request head larger than this is answered by libmicrohttpd 0.9.75 itself (a bare HTML
    /// 414 or 431), and one that only just fits leaves no room for any response header, so the
    /// connection is closed without an answer (measured: heads within about 400 bytes of the
    /// limit). Applications should refuse heads well below this with their own answer. The whole
    /// pool is zeroed after every request: measured at 7 % of a cached request's CPU with 32 KiB
    /// (`bench/run` with `BENCH_PERF`), so it is kept no larger than the heads it must hold.
    public var connectionMemoryLimitBytes: Int
    /// Seconds a client may take to send a whole request (request line, headers and body), from
    /// the connection's opening or the end of its previous request, however it trickles the
    /// bytes. Default 0: only ``connectionTimeoutSeconds`` (silence) applies.
    public var requestHeadTimeoutSeconds: Int
    /// libmicrohttpd's `MHD_OPTION_STRICT_FOR_CLIENT`: 0 (default) or 1. What 1 changes in
    /// libmicrohttpd 0.9.75 (measured, behaviour §7.4): a request target holding a space closes
    /// the connection without an answer, and an HTTP/1.1 request without `Host` gets
    /// libmicrohttpd's bare 400 page instead of the handler's answer. Nothing else: the framing
    /// rules are the server's own (``HTTPHeadRefusal``).
    public var strictForClient: Int
    /// Most query parameters a request target may hold; more are refused with 414 before
    /// libmicrohttpd parses them. Default 100. libmicrohttpd 0.9.75 keeps each parameter in the
    /// connection's memory (about 64 bytes apiece): about 350 short ones used it up, and the
    /// client got no answer at all (behaviour §7.4).
    public var maxQueryParameters: Int

    public init(
        host: String = "127.0.0.1", port: Int = 8080, threadCount: Int = 2, maxBodyBytes: Int = 65536,
        maxConnections: Int = 4096, connectionTimeoutSeconds: Int = 60, connectionMemoryLimitBytes: Int = 24576,
        requestHeadTimeoutSeconds: Int = 0, strictForClient: Int = 0, maxQueryParameters: Int = 100
    ) {
        self.maxQueryParameters = maxQueryParameters
        self.strictForClient = strictForClient
        self.host = host
        self.port = port
        self.threadCount = threadCount
        self.maxBodyBytes = maxBodyBytes
        self.maxConnections = maxConnections
        self.connectionTimeoutSeconds = connectionTimeoutSeconds
        self.connectionMemoryLimitBytes = connectionMemoryLimitBytes
        self.requestHeadTimeoutSeconds = requestHeadTimeoutSeconds
    }
}
