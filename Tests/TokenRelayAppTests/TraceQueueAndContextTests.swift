import Foundation
import PostgresBridge
import Testing
import TokenRelayBase

/// The tracer's bounded queue, the reading of a caller's `traceparent`, and the operation name of
/// a statement span (behaviour §8.11); no sockets.
@Suite("Trace queue and context")
struct TraceQueueAndContextTests {
    static func span(_ name: String) -> SpanRecord {
        SpanRecord(
            name: name, kind: .internal, context: .newTrace(), parentSpanId: 0, startNanos: 1, endNanos: 2, attributes: [], failed: false)
    }

    @Test("A full queue drops the span and counts it; a request never waits for room")
    func fullQueueDropsAndCounts() {
        let metrics = Metrics()
        let tracer = Tracer(capacity: 16, batchSize: 8, metrics: metrics)
        for index in 0..<20 { tracer.record(Self.span("s\(index)")) }
        #expect(tracer.count == 16)
        #expect(metrics.value("tokenrelay_trace_spans_dropped_total") == 4)
        #expect(tracer.take().map(\.name) == (0..<8).map { "s\($0)" }, "the oldest first, a batch at a time")
        tracer.record(Self.span("later"))
        #expect(tracer.count == 9)
        #expect(metrics.value("tokenrelay_trace_spans_dropped_total") == 4)
        #expect(metrics.render().contains("tokenrelay_trace_spans_dropped_total 4"))
    }

    @Test("A valid traceparent is the request's remote parent with its tracestate; anything else starts a new trace")
    func remoteParent() throws {
        let header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let parent = try #require(TraceContext.remoteParent(traceparent: header, tracestate: ["rojo=00f067aa0ba902b7", "congo=t61rcWkgMzE"]))
        #expect(parent.traceparent == header)
        #expect(parent.traceState == "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
        #expect(parent.sampled)
        let child = parent.child()
        #expect(child.traceIdHex == "4bf92f3577b34da6a3ce929d0e0e4736" && child.spanId != parent.spanId && child.spanId != 0)
        #expect(TraceContext.remoteParent(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", tracestate: [])?.sampled == false)
        // A later version may carry more after a dash (W3C Trace Context §3.2.4).
        #expect(TraceContext.remoteParent(traceparent: "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what", tracestate: []) != nil)
        for invalid in [
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e47zz-00f067aa0ba902b7-01", "",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",
        ] {
            #expect(TraceContext.remoteParent(traceparent: invalid, tracestate: ["a=b"]) == nil, "\(invalid)")
        }
        let long = String(repeating: "k=v,", count: 200)
        #expect(TraceContext.remoteParent(traceparent: header, tracestate: [long])?.traceState == nil, "a tracestate over 512 bytes is not passed on")
    }

    @Test("A new trace is sampled, with random non-zero ids in lower-case hex")
    func newTrace() {
        let a = TraceContext.newTrace(), b = TraceContext.newTrace()
        #expect(a.sampled && a.traceIdHex != b.traceIdHex && a.spanId != 0)
        #expect(a.traceparent.utf8.count == 55 && a.traceparent == a.traceparent.lowercased())
    }

    @Test("A statement span is named by the statement's operation, the body of a WITH query included, never by its text")
    func statementOperation() {
        #expect(PostgresStatement.operation(of: "\n  select account_id from accounts where id = $1") == "SELECT")
        #expect(PostgresStatement.operation(of: "BEGIN") == "BEGIN")
        #expect(
            PostgresStatement.operation(of: "WITH claimed AS (SELECT id FROM leases WHERE x = 'a)(' FOR UPDATE) UPDATE leases SET y = 1 FROM claimed")
                == "UPDATE")
        #expect(PostgresStatement.operation(of: "with a as (select 1), b as (delete from t returning *) insert into u select * from b") == "INSERT")
        #expect(PostgresStatement.operation(of: "  ") == nil)
    }

    @Test("OTLP/JSON: hex ids, 64-bit integers as strings, escaped strings, status error only on failure")
    func otlpJSON() throws {
        let context = try #require(
            TraceContext.remoteParent(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: ["congo=t61rcWkgMzE"]))
        let span = SpanRecord(
            name: "GET \"quoted\"", kind: .client, context: context, parentSpanId: 0x0102_0304_0506_0708, startNanos: 1_764_910_000_123_456_789,
            endNanos: 1_764_910_000_223_456_789, attributes: [("http.response.status_code", .int(503)), ("neg", .int(-7)), ("b", .bool(true))], failed: true)
        let body = OTLPTraceJSON.encode([span, Self.span("plain")], serviceName: "token-relay", serviceVersion: "1.0")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        let resource = try #require((object["resourceSpans"] as? [[String: Any]])?.first)
        let spans = try #require(((resource["scopeSpans"] as? [[String: Any]])?.first)?["spans"] as? [[String: Any]])
        #expect(spans.count == 2)
        let first = spans[0]
        #expect(first["traceId"] as? String == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(first["spanId"] as? String == Hex.of(context.spanId))
        #expect(first["parentSpanId"] as? String == "0102030405060708")
        #expect(first["traceState"] as? String == "congo=t61rcWkgMzE")
        #expect(first["name"] as? String == "GET \"quoted\"")
        #expect(first["kind"] as? Int == 3 && first["flags"] as? Int == 1)
        #expect(first["startTimeUnixNano"] as? String == "1764910000123456789" && first["endTimeUnixNano"] as? String == "1764910000223456789")
        #expect((first["status"] as? [String: Any])?["code"] as? Int == 2)
        let values = (first["attributes"] as? [[String: Any]] ?? []).map { ($0["key"] as? String ?? "", $0["value"] as? [String: Any] ?? [:]) }
        #expect(values.map(\.0) == ["http.response.status_code", "neg", "b"])
        #expect(values[0].1["intValue"] as? String == "503" && values[1].1["intValue"] as? String == "-7" && values[2].1["boolValue"] as? Bool == true)
        #expect(spans[1]["parentSpanId"] == nil && (spans[1]["status"] as? [String: Any])?.isEmpty == true)
    }
}
