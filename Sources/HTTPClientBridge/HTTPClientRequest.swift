public import HTTPCommon

/// An outgoing HTTP/1.1 request for `HTTPClient.execute(_:)`.
public struct HTTPClientRequest: Sendable {
    /// Upper-case method, e.g. `GET`, `POST`. Default `GET`.
    public var method: String
    /// Absolute `http` or `https` URL, already percent-encoded.
    public var url: String
    /// Request header fields. Without a `Content-Type`, a request with a body is sent as
    /// `application/x-www-form-urlencoded` (libcurl's default). Names and values must not
    /// contain CR or LF.
    public var headers: HTTPHeaders
    /// Body bytes, sent with `Content-Length`; nil sends none (an empty body for `POST`).
    public var body: [UInt8]?
    /// Limit for the whole transfer (connect, send, receive) in seconds. Default 10.
    public var timeout: Double

    public init(
        method: String = "GET", url: String, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8]? = nil,
        timeout: Double = 10
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}
