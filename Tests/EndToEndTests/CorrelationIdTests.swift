import Foundation
import Testing
import TokenRelayTesting

/// The caller's correlation id (body `correlation_id` or `client-request-id` header) names the
/// answer and its log line, and one that cannot be a header is refused; a well-formed
/// `traceparent` is logged with the request (behaviour §8.3).
@Suite("Correlation ids and traceparent", .serialized)
struct CorrelationIdTests {
    @Test("The body's correlation_id names the answer in body and in exactly one client-request-id on every path; /healthz echoes client-request-id")
    func correlationIds() async throws {
        let stack = try await TokenRelayStack(name: "e2e_correlation")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        for force in [false, true] {
            let answer = try await stack.request(
                "POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": force, "correlation_id": "corr-body-\(force)"])
            #expect(answer.json["correlation_id"] as? String == "corr-body-\(force)")
            #expect(answer.headers.values(for: "client-request-id") == ["corr-body-\(force)"])
        }
        let problem = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": "acc_missing", "scopes": ["User.Read"], "correlation_id": "corr-problem"])
        #expect(problem.status == 404)
        #expect(problem.json["correlation_id"] as? String == "corr-problem")
        #expect(problem.headers.values(for: "client-request-id") == ["corr-problem"])
        let health = try await stack.request("GET", "/healthz", headers: ["client-request-id": "corr-health"], authenticated: false)
        #expect(health.headers.values(for: "client-request-id") == ["corr-health"])
    }

    @Test("A body correlation_id that cannot be a header is 400 naming it (a line break was a bare 500, a long one closed the connection)")
    func correlationIdInBody() async throws {
        let stack = try await TokenRelayStack(name: "e2e_nu_correlation")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let bad = ["a\r\nX-Injected: 1", "line\nbreak", String(repeating: "c", count: 5000), "tab\there"]
        for value in bad {
            // The usual body shape (answered on the server thread when cached) and the full parser's.
            for extra in [[:], ["min_ttl_s": 0]] as [[String: Any]] {
                var body: [String: Any] = ["account_id": id, "scopes": ["User.Read"], "correlation_id": value]
                body.merge(extra) { $1 }
                let silent = try await stack.request("POST", "/v1/tokens/silent", json: body)
                #expect(silent.status == 400, "\(value.prefix(20)): \(silent.text)")
                #expect(silent.json["field"] as? String == "correlation_id")
                #expect(silent.headers["Content-Type"]?.hasPrefix("application/problem+json") == true)
            }
            let app = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": ["https://graph.microsoft.com/.default"], "correlation_id": value])
            #expect(app.status == 400, "\(app.text)")
            #expect(app.json["field"] as? String == "correlation_id")
        }
        let fine = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "correlation_id": "my-id-1"])
        #expect(fine.status == 200)
        #expect(fine.headers["client-request-id"] == "my-id-1")
    }

    @Test("A well-formed traceparent is logged with the request, on both steps; a malformed one is not")
    func traceparentLogged() async throws {
        let stack = try await TokenRelayStack(name: "e2e_traceparent")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let body: [String: Any] = ["account_id": id, "scopes": ["User.Read"]]
        let refreshed = try await stack.request("POST", "/v1/tokens/silent", json: body, headers: ["traceparent": trace, "client-request-id": "trace-1"])
        let cached = try await stack.request("POST", "/v1/tokens/silent", json: body, headers: ["traceparent": trace, "client-request-id": "trace-2"])
        let malformed = try await stack.request(
            "POST", "/v1/tokens/silent", json: body, headers: ["traceparent": "00-zz-01", "client-request-id": "trace-3"])
        #expect(refreshed.status == 200 && cached.status == 200 && malformed.status == 200)
        try await Task.sleep(for: .milliseconds(50))
        let lines = stack.relay.log().split(separator: "\n").filter { $0.contains("\"request.completed\"") }
        func line(_ id: String) -> Substring? { lines.last { $0.contains(id) } }
        #expect(line("trace-1")?.contains(#""trace.parent":"\#(trace)""#) == true, "\(String(describing: line("trace-1")))")
        #expect(line("trace-2")?.contains(#""trace.parent":"\#(trace)""#) == true)
        #expect(line("trace-2")?.contains(#""request.step":"server_thread""#) == true)
        #expect(line("trace-3").map { !$0.contains("trace.parent") } == true)
    }
}
