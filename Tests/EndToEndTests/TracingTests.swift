import Foundation
import Testing
import TokenRelayTesting

/// OpenTelemetry traces (issue 28 part 1; behaviour §8.11) read from an OTLP/HTTP receiver
/// that checks every export against the OpenTelemetry project's own protobuf definitions
/// (Tests/OTLP/otlp_receiver.py, PyPI `opentelemetry-proto`; `make test` sets
/// TOKENRELAY_TEST_PYTHON_BIN), and from the emulator's record of the `traceparent` it received.
@Suite("OpenTelemetry traces", .serialized, .timingGroup(.heavy))
struct TracingTests {
    static let alice = "alice@contoso.example"

    /// The Python receiver and the file it records each export in.
    final class Receiver: Sendable {
        let process: ManagedProcess
        let record: String

        init() async throws {
            let bin = try #require(
                ProcessInfo.processInfo.environment["TOKENRELAY_TEST_PYTHON_BIN"],
                "set TOKENRELAY_TEST_PYTHON_BIN to the bin directory printed by scripts/python-tools (make test does)")
            record = NSTemporaryDirectory() + "/tokenrelay-otlp-\(UUID().uuidString).jsonl"
            process = try await ManagedProcess.start(
                executable: bin + "/python", arguments: [BuiltProducts.packageRoot() + "/Tests/OTLP/otlp_receiver.py", record],
                environment: ProcessInfo.processInfo.environment)
        }

        deinit {
            process.stop()
            try? FileManager.default.removeItem(atPath: record)
        }

        /// Every export so far: its spans, or the receiver's reason for refusing it.
        func exports() -> [[String: Any]] {
            guard let text = try? String(contentsOfFile: record, encoding: .utf8) else { return [] }
            return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }

        var spans: [[String: Any]] { exports().flatMap { $0["spans"] as? [[String: Any]] ?? [] } }
        var errors: [String] { exports().compactMap { $0["error"] as? String } }
    }

    static func attributes(_ span: [String: Any]) -> [String: Any] { span["attributes"] as? [String: Any] ?? [:] }
    static func string(_ span: [String: Any], _ key: String) -> String? { span[key] as? String }

    /// The spans of trace `traceId` once `done` holds of them (the export interval is short).
    static func trace(_ traceId: String, in receiver: Receiver, until done: ([[String: Any]]) -> Bool) async throws -> [[String: Any]] {
        var spans: [[String: Any]] = []
        _ = try await eventually(within: 15) {
            spans = receiver.spans.filter { $0["traceId"] as? String == traceId }
            return done(spans)
        }
        return spans
    }

    /// No attribute of any span carries a secret or personal value (behaviour §8.11).
    static func expectNothingSecret(_ receiver: Receiver, stack: TokenRelayStack, accountId: String) async throws {
        let issued = try await stack.issuedSecrets()
        let secrets =
            [stack.apiKey, stack.clientSecret, alice, "alice", accountId] + issued.accessTokens + issued.refreshTokens + issued.idTokens + issued.codes
        let spans = receiver.spans
        #expect(!spans.isEmpty)
        for span in spans {
            var values = Self.attributes(span).values.map { "\($0)" }
            values += [Self.string(span, "name") ?? "", Self.string(span, "traceState") ?? ""]
            for value in values {
                #expect(!secrets.contains { !$0.isEmpty && value.contains($0) }, "span \(span["name"] ?? "") carries a secret or personal value")
                #expect(!value.contains("?"), "span \(span["name"] ?? "") carries a query string: \(value)")
            }
        }
    }

    /// The silent request's span, its trace and span ids, and the trace's spans once the
    /// token-endpoint span and a write statement's span have arrived: an export may carry the
    /// request's span before the last of its statements' (waiting for the token endpoint's alone
    /// failed a full run with no INSERT or UPDATE yet seen).
    static func silentRefreshTrace(in receiver: Receiver) async throws -> (request: [String: Any], traceId: String, requestId: String, spans: [[String: Any]]) {
        var request: [String: Any] = [:]
        _ = try await eventually(within: 15) {
            request = receiver.spans.first { attributes($0)["http.route"] as? String == "/v1/tokens/silent" } ?? [:]
            return !request.isEmpty
        }
        let traceId = try #require(string(request, "traceId"))
        let requestId = try #require(string(request, "spanId"))
        let spans = try await trace(traceId, in: receiver) { spans in
            spans.contains { attributes($0)["tokenrelay.upstream"] as? String == "sts" }
                && spans.contains { ["INSERT", "UPDATE"].contains(attributes($0)["db.operation.name"] as? String ?? "") }
        }
        return (request, traceId, requestId, spans)
    }

    @Test("One refresh: the request span is the parent of its statement spans and of the token-endpoint span, whose id the token endpoint receives")
    func refreshTrace() async throws {
        let receiver = try await Receiver()
        let stack = try await TokenRelayStack(
            name: "e2e_tracing_refresh", environment: ["TOKENRELAY_OTLP_ENDPOINT": receiver.process.baseURL, "TOKENRELAY_OTLP_INTERVAL_MS": "100"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId(Self.alice)
        let answer = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(answer.status == 200, "\(answer.text)")

        let (request, traceId, requestId, spans) = try await Self.silentRefreshTrace(in: receiver)
        #expect(receiver.errors.isEmpty, "the receiver refused an export: \(receiver.errors)")

        // The request: a server span, root of a new trace (no traceparent was sent).
        #expect(request["kind"] as? Int == 2)
        #expect(Self.string(request, "parentSpanId") == "")
        #expect(Self.string(request, "name") == "POST /v1/tokens/silent")
        #expect(Self.attributes(request)["http.request.method"] as? String == "POST")
        #expect(Self.attributes(request)["http.response.status_code"] as? Int == 200)
        #expect((request["resource"] as? [String: Any])?["service.name"] as? String == "token-relay")

        // Its statements: client spans of PostgreSQL, children of the request, named by operation.
        let statements = spans.filter { Self.attributes($0)["db.system.name"] as? String == "postgresql" }
        #expect(!statements.isEmpty, "no statement span in \(spans.map { $0["name"] ?? "" })")
        #expect(statements.allSatisfy { Self.string($0, "parentSpanId") == requestId && $0["kind"] as? Int == 3 })
        let operations = Set(statements.compactMap { Self.attributes($0)["db.operation.name"] as? String })
        #expect(operations.contains("SELECT") && !operations.isDisjoint(with: ["INSERT", "UPDATE"]), "\(operations)")
        #expect(operations.isSubset(of: ["SELECT", "INSERT", "UPDATE", "DELETE", "BEGIN", "COMMIT", "ROLLBACK"]), "\(operations)")

        // The token-endpoint call: a client span of the request, whose id the STS received.
        let sts = try #require(spans.first { Self.attributes($0)["tokenrelay.upstream"] as? String == "sts" })
        #expect(Self.string(sts, "parentSpanId") == requestId)
        #expect(Self.attributes(sts)["http.response.status_code"] as? Int == 200)
        #expect(Self.attributes(sts)["server.address"] as? String == "127.0.0.1")
        #expect(Self.attributes(sts)["http.request.method"] as? String == "POST")
        let start = try #require(request["start"] as? Int), end = try #require(request["end"] as? Int)
        #expect((sts["start"] as? Int ?? 0) >= start && (sts["end"] as? Int ?? .max) <= end, "the call lies within the request")
        let received = try await stack.control("GET", "/_control/token-requests").json["requests"] as? [[String: Any]] ?? []
        let refresh = try #require(received.last { $0["grant_type"] as? String == "refresh_token" })
        #expect(refresh["traceparent"] as? String == "00-\(traceId)-\(Self.string(sts, "spanId") ?? "")-01")

        try await Self.expectNothingSecret(receiver, stack: stack, accountId: id)
        let metrics = try await stack.request("GET", "/metrics").text
        #expect(metrics.contains("tokenrelay_trace_spans_exported_total "), "\(metrics.split(separator: "\n").filter { $0.contains("trace") })")
        let check = try await MonitoringContractTests.promtoolCheckMetrics(metrics)
        #expect(check.status == 0, "the trace families pass promtool check metrics: \(check.error)\(check.output)")
    }

    @Test("A token-endpoint call longer than a third of the lease: its lease renewals are statement spans of the request's trace")
    func renewalsInTheRequestsTrace() async throws {
        let receiver = try await Receiver()
        // A lease of 2 s is renewed every 0.67 s: a 1.6 s call renews it twice.
        let stack = try await TokenRelayStack(
            name: "e2e_tracing_renewal",
            environment: ["TOKENRELAY_OTLP_ENDPOINT": receiver.process.baseURL, "TOKENRELAY_OTLP_INTERVAL_MS": "100", "TOKENRELAY_REFRESH_LEASE_S": "2"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId(Self.alice)
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "latency_ms": 1600])
        let answer = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(answer.status == 200, "\(answer.text)")

        let (_, _, requestId, spans) = try await Self.silentRefreshTrace(in: receiver)
        let sts = try #require(spans.first { Self.attributes($0)["tokenrelay.upstream"] as? String == "sts" })
        let (callStart, callEnd) = (sts["start"] as? Int ?? 0, sts["end"] as? Int ?? 0)
        // The renewals run while the call does (the rotation's write and the touch come after it).
        let renewals = spans.filter { span in
            Self.attributes(span)["db.operation.name"] as? String == "UPDATE" && (span["start"] as? Int ?? 0) >= callStart
                && (span["end"] as? Int ?? .max) <= callEnd
        }
        #expect(renewals.count >= 1, "no renewal statement in the request's trace: \(spans.map { $0["name"] ?? "" })")
        #expect(renewals.allSatisfy { Self.string($0, "parentSpanId") == requestId })
        let metrics = try await stack.request("GET", "/metrics").text
        #expect(metrics.contains(#"tokenrelay_refresh_lease_renewals_total{result="renewed"}"#), "the lease was renewed")
    }

    @Test(
        "A downstream call with the caller's traceparent: same trace, the caller's span is the request's parent, the API receives our own span's id and the tracestate; flushed on SIGTERM"
    )
    func downstreamWithCallersTraceparent() async throws {
        let receiver = try await Receiver()
        // An interval longer than the test: what arrives was sent by the shutdown's flush.
        let stack = try await TokenRelayStack(
            name: "e2e_tracing_downstream", environment: ["TOKENRELAY_OTLP_ENDPOINT": receiver.process.baseURL, "TOKENRELAY_OTLP_INTERVAL_MS": "60000"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId(Self.alice)
        let traceId = "4bf92f3577b34da6a3ce929d0e0e4736", callerSpan = "00f067aa0ba902b7"
        let me = try await stack.request(
            "GET", "/v1/downstream/graph/me",
            headers: ["X-Account-Id": id, "traceparent": "00-\(traceId)-\(callerSpan)-01", "tracestate": "congo=t61rcWkgMzE"])
        #expect(me.status == 200, "\(me.text)")
        #expect(receiver.spans.filter { $0["traceId"] as? String == traceId }.isEmpty, "nothing exported before the interval")

        await stack.relay.stopAndWait()
        let spans = receiver.spans.filter { $0["traceId"] as? String == traceId }
        #expect(receiver.errors.isEmpty, "the receiver refused an export: \(receiver.errors)")
        let request = try #require(spans.first { $0["kind"] as? Int == 2 }, "the shutdown flushed the request's spans: \(spans)")
        #expect(Self.string(request, "parentSpanId") == callerSpan)
        #expect(Self.string(request, "traceState") == "congo=t61rcWkgMzE")
        #expect(Self.attributes(request)["http.route"] as? String == "/v1/downstream/{api}/{path...}")
        let downstream = try #require(spans.first { Self.attributes($0)["tokenrelay.upstream"] as? String == "downstream" })
        let downstreamId = try #require(Self.string(downstream, "spanId"))
        #expect(Self.string(downstream, "parentSpanId") == Self.string(request, "spanId"))
        #expect(Self.attributes(downstream)["http.request.method"] as? String == "GET")
        #expect(Self.attributes(downstream)["http.response.status_code"] as? Int == 200)

        let graph = try await stack.control("GET", "/_control/graph-requests").json["requests"] as? [[String: Any]] ?? []
        let call = try #require(graph.last { $0["path"] as? String == "/v1.0/me" })
        #expect(call["traceparent"] as? String == "00-\(traceId)-\(downstreamId)-01", "our span's id, not the caller's")
        #expect(call["tracestate"] as? String == "congo=t61rcWkgMzE")
        try await Self.expectNothingSecret(receiver, stack: stack, accountId: id)
    }

    @Test("Without TOKENRELAY_OTLP_ENDPOINT the downstream API still gets a child of the caller's span, never the caller's traceparent unchanged")
    func propagatedWithoutExport() async throws {
        let stack = try await TokenRelayStack(name: "e2e_tracing_off")
        defer { stack.stop() }
        let id = try await stack.signInAccountId(Self.alice)
        let traceId = "0af7651916cd43dd8448eb211c80319c", callerSpan = "b7ad6b7169203331"
        let me = try await stack.request(
            "GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id, "traceparent": "00-\(traceId)-\(callerSpan)-01"])
        #expect(me.status == 200, "\(me.text)")
        let graph = try await stack.control("GET", "/_control/graph-requests").json["requests"] as? [[String: Any]] ?? []
        let sent = try #require(graph.last { $0["path"] as? String == "/v1.0/me" }?["traceparent"] as? String)
        let parts = sent.split(separator: "-").map(String.init)
        #expect(parts.count == 4 && parts[0] == "00" && parts[1] == traceId && parts[3] == "01", "\(sent)")
        #expect(parts.count == 4 && parts[2] != callerSpan && parts[2].count == 16 && parts[2] != String(repeating: "0", count: 16), "\(sent)")
    }
}
