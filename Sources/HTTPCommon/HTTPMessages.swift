/// A request as the server bridge hands it to the application: the whole body read.
public struct HTTPRequest: Sendable {
    /// Upper-case method, e.g. `GET`.
    public var method: String
    /// The path, percent-decoded by the server, without the query (`/v1/accounts/abc`).
    public var path: String
    /// Query parameters in order, percent-decoded (`?a=1&a=2` gives two entries).
    public var query: [(name: String, value: String)]
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// True when the body exceeded the server's limit; `body` is then empty and the handler
    /// should answer 413 without reading it.
    public var bodyExceededLimit: Bool
    /// The peer's address, e.g. `127.0.0.1`, when known.
    public var remoteAddress: String?
    /// The protocol version of the request line (`HTTP/1.1`, `HTTP/1.0`); nil for a request made
    /// in memory (tests), which carries no request line.
    public var version: String?

    public init(
        method: String, path: String, query: [(name: String, value: String)] = [], headers: HTTPHeaders = HTTPHeaders(),
        body: [UInt8] = [], bodyExceededLimit: Bool = false, remoteAddress: String? = nil, version: String? = nil
    ) {
        self.version = version
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.bodyExceededLimit = bodyExceededLimit
        self.remoteAddress = remoteAddress
    }

    /// Bytes of the request target as decoded: the path, plus `?`, `=` and `&` and every query
    /// name and value. At most the bytes on the wire (percent-decoding only shrinks).
    public var targetBytes: Int {
        var count = path.utf8.count
        for item in query { count += item.name.utf8.count + item.value.utf8.count + 2 }
        return count
    }

    /// Bytes of the header section as sent: each field's name and value plus `": "` and CRLF.
    public var headerFieldBytes: Int {
        var count = 0
        for field in headers { count += field.name.utf8.count + field.value.utf8.count + 4 }
        return count
    }

    /// The first value of query parameter `name`, or nil.
    public func queryValue(_ name: String) -> String? {
        query.first { $0.name == name }?.value
    }
}

/// A complete response: status, headers and body bytes.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}
