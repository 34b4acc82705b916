internal import CCurl

/// A request that got no HTTP response: connection, transfer, limit or usage failures.
///
/// `description` names the libcurl function and libcurl's text for the code; it never contains
/// the URL, its query, or any header value.
public struct HTTPClientError: Error, CustomStringConvertible, Sendable {
    /// A bounded code, usable as a metric label.
    public enum Kind: String, Sendable {
        /// No connection was established (refused, unreachable, DNS or TLS handshake failure).
        case connectFailed
        /// The whole-transfer timeout (`HTTPClientRequest.timeout`) elapsed.
        case timedOut
        /// Sending the request failed after connecting.
        case sendFailed
        /// Receiving the response failed, or the peer closed without a complete response.
        case receiveFailed
        /// The URL is malformed or not `http`/`https`.
        case invalidURL
        /// The response body exceeded `HTTPClient`'s `maxResponseBytes`.
        case tooLarge
        /// Anything else (including a client that was shut down).
        case other
    }

    public var kind: Kind
    /// Whether any byte of the request reached the socket. False means the server cannot have
    /// seen the request, so even a non-idempotent call may be retried (behaviour §5).
    public var requestSent: Bool
    /// The libcurl function (or bridge step) that reported the failure.
    public var function: String
    /// libcurl's text for the code (`curl_easy_strerror`) or the bridge's explanation.
    public var reason: String

    public init(kind: Kind, requestSent: Bool, function: String, reason: String) {
        self.kind = kind
        self.requestSent = requestSent
        self.function = function
        self.reason = reason
    }

    public var description: String {
        "HTTPClientError.\(kind.rawValue) in \(function): \(reason)" + (requestSent ? " (request sent)" : " (request not sent)")
    }

    static let shutDown = HTTPClientError(kind: .other, requestSent: false, function: "HTTPClient", reason: "client is shut down")
}

extension HTTPClientError {
    /// The one place that turns a libcurl easy-interface code into an `HTTPClientError`.
    init(curlCode code: CURLcode, function: String, requestSent: Bool) {
        let kind: Kind =
            switch code {
            case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_SSL_CONNECT_ERROR,
                CURLE_PEER_FAILED_VERIFICATION:
                .connectFailed
            case CURLE_OPERATION_TIMEDOUT: .timedOut
            case CURLE_SEND_ERROR: .sendFailed
            case CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_WEIRD_SERVER_REPLY, CURLE_HTTP2,
                CURLE_HTTP2_STREAM:
                .receiveFailed
            case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL: .invalidURL
            case CURLE_FILESIZE_EXCEEDED: .tooLarge
            default: .other
            }
        let text = curl_easy_strerror(code).map { String(cString: $0) } ?? "unknown"
        self.init(kind: kind, requestSent: requestSent, function: function, reason: "\(text) (CURLcode \(code.rawValue))")
    }

    /// An error for a failed `curl_multi_*` call.
    init(curlMultiCode code: CURLMcode, function: String) {
        let text = curl_multi_strerror(code).map { String(cString: $0) } ?? "unknown"
        self.init(kind: .other, requestSent: false, function: function, reason: "\(text) (CURLMcode \(code.rawValue))")
    }
}
