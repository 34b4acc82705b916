/// One Graph request as the emulator saw it, without its token: `GET /_control/graph-requests`
/// lists the newest ones, so tests can tell which URLs reached Graph and whether each carried a
/// token the emulator issued (a request that went around the relay carries none).
struct GraphRequestRecord: Sendable {
    /// At most this many are kept, the newest last.
    static let capacity = 500

    var method: String
    /// The path as decoded by the server, e.g. `/v1.0/me/messages`.
    var path: String
    /// The query as decoded, in order.
    var query: [(name: String, value: String)]
    /// True when the bearer token's signature verified (a token the emulator issued, expired or not).
    var tokenVerified: Bool
    /// The W3C `traceparent` and `tracestate` headers as received, nil when absent.
    var traceparent: String? = nil
    var tracestate: String? = nil

    var json: JSONValue {
        .object([
            ("method", .string(method)), ("path", .string(path)),
            ("query", .object(query.map { ($0.name, JSONValue.string($0.value)) })), ("token_verified", .bool(tokenVerified)),
            ("traceparent", traceparent.map(JSONValue.string) ?? .null), ("tracestate", tracestate.map(JSONValue.string) ?? .null),
        ])
    }
}
