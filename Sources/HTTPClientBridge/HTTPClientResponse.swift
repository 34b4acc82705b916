public import HTTPCommon

/// A complete HTTP response. Every status (including 3xx, 4xx and 5xx) arrives here, not as an
/// error; redirects are not followed.
public struct HTTPClientResponse: Sendable {
    /// The status code of the final response (after any `100 Continue`).
    public var status: Int
    /// Header fields of the final response block, looked up case-insensitively.
    public var headers: HTTPHeaders
    /// The body, decoded from chunked transfer coding but not from any `Content-Encoding`.
    public var body: [UInt8]

    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}
