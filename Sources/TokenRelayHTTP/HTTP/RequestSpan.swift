import HTTPCommon
import TokenRelayBase

/// The server span of one request (behaviour §8.11; OpenTelemetry HTTP server semantic
/// conventions): a child of the caller's `traceparent` when it sent a valid one (its `tracestate`
/// kept), else the root of a new trace. Its attributes name the route template, never the path
/// or query, and nothing of the caller but the method and the status it got.
struct RequestSpan: Sendable {
    /// The span the request's statements and upstream calls are children of.
    let active: ActiveSpan
    /// The caller's span id, 0 for a new trace.
    let parentSpanId: UInt64

    /// The request's span: always when the caller sent a valid `traceparent` (its id goes to the
    /// token endpoint and downstream APIs even when nothing is recorded), else only while tracing
    /// is on. Recorded when `tracer` is set and the caller's flags do not say unsampled.
    static func begin(_ headers: HTTPHeaders, tracer: Tracer?) -> RequestSpan? {
        if let parent = TraceContext.remoteParent(traceparent: headers["traceparent"], tracestate: headers.values(for: "tracestate")) {
            return RequestSpan(active: ActiveSpan(context: parent.child(), tracer: parent.sampled ? tracer : nil), parentSpanId: parent.spanId)
        }
        guard let tracer else { return nil }
        return RequestSpan(active: ActiveSpan(context: .newTrace(), tracer: tracer), parentSpanId: 0)
    }

    /// Methods named as they are; any other is `_OTHER` (semantic conventions `http.request.method`).
    private static let knownMethods: Set<String> = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"]

    /// Queues the span, when recorded, as the request answered `status` after `elapsed`.
    /// - Parameter route: the matched route's template, nil when none matched.
    func end(method: String, route: String?, status: Int, elapsed: Duration, suspended: Bool) {
        guard let tracer = active.tracer else { return }
        let end = Tracer.nowNanos()
        let nanos = UInt64(max(0, elapsed.components.seconds)) * 1_000_000_000 + UInt64(max(0, elapsed.components.attoseconds) / 1_000_000_000)
        let method = Self.knownMethods.contains(method) ? method : "_OTHER"
        var attributes: [(String, SpanRecord.Value)] = [
            ("http.request.method", .string(method)), ("http.response.status_code", .int(status)),
            ("tokenrelay.step", .string(suspended ? "suspended" : "server_thread")),
        ]
        if let route { attributes.append(("http.route", .string(route))) }
        // A server span fails on a 5xx only: a 4xx is the caller's (semantic conventions, HTTP spans' status).
        if status >= 500 { attributes.append(("error.type", .string(String(status)))) }
        tracer.record(
            SpanRecord(
                name: route.map { (method == "_OTHER" ? "HTTP" : method) + " " + $0 } ?? (method == "_OTHER" ? "HTTP" : method), kind: .server,
                context: active.context, parentSpanId: parentSpanId, startNanos: end > nanos ? end - nanos : end, endNanos: end,
                attributes: attributes, failed: status >= 500))
    }
}
