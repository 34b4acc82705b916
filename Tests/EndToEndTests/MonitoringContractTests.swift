import Foundation
import Testing
import TokenRelayTesting

/// The alert rules and the dashboard in deploy/monitoring name only metrics that `/metrics`
/// really exposes (issue 6: operators' dashboards must not go blank after a rename).
@Suite("Monitoring contract", .timingGroup(.measuring))
struct MonitoringContractTests {
    /// Every `tokenrelay_*` name used by a file of deploy/monitoring, histogram series suffixes
    /// (`_bucket`, `_sum`, `_count`) included as written.
    static func namesUsed() throws -> [String: Set<String>] {
        let directory = BuiltProducts.packageRoot() + "/deploy/monitoring"
        let files = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".yaml") || $0.hasSuffix(".json") }
        let pattern = try Regex("tokenrelay_[a-z0-9_]+")
        var used: [String: Set<String>] = [:]
        for file in files {
            let text = try String(contentsOfFile: directory + "/" + file, encoding: .utf8)
            used[file] = Set(text.matches(of: pattern).map { String(text[$0.range]) })
        }
        return used
    }

    /// Metric families announced by a Prometheus text exposition (`# TYPE name type`), with
    /// the series names each family may have.
    static func exposedSeries(_ exposition: String) -> Set<String> {
        var names = Set<String>()
        for line in exposition.split(separator: "\n") where line.hasPrefix("# TYPE ") {
            let parts = line.split(separator: " ")
            guard parts.count == 4 else { continue }
            let name = String(parts[2])
            names.insert(name)
            if parts[3] == "histogram" { names.formUnion(["_bucket", "_sum", "_count"].map { name + $0 }) }
        }
        return names
    }

    @Test("Every metric the alert rules and the Grafana dashboard use is one /metrics exposes")
    func dashboardAndAlertsUseRealMetrics() async throws {
        let used = try Self.namesUsed()
        #expect(used.keys.contains("prometheus-rules.yaml") && used.keys.contains("grafana-dashboard.json"))
        #expect(used.values.allSatisfy { !$0.isEmpty }, "a monitoring file names no tokenrelay_ metric")

        let stack = try await TokenRelayStack(name: "e2e_monitoring")
        defer { stack.stop() }
        _ = try await stack.request("GET", "/readyz", authenticated: false)
        let metrics = try await stack.request("GET", "/metrics", authenticated: false)
        #expect(metrics.status == 200)
        let exposed = Self.exposedSeries(metrics.text)
        for (file, names) in used.sorted(by: { $0.key < $1.key }) {
            let missing = names.subtracting(exposed).sorted()
            #expect(missing.isEmpty, "\(file) uses metrics /metrics does not expose: \(missing.joined(separator: ", "))")
        }
        #expect(metrics.text.contains("tokenrelay_ready 1"), "readiness passed, so the readiness gauge is 1")
        #expect(Self.exposition(metrics.text).isEmpty, "\(Self.exposition(metrics.text))")
    }

    /// The value of the sample `series` (name and labels exactly as exposed), 0 when absent.
    static func sample(_ exposition: String, _ series: String) -> Double {
        for line in exposition.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1)) ?? 0
        }
        return 0
    }

    @Test("Answers given on the server thread are counted and timed: cache hits, /healthz, 404 and 401 (issue 10 item 11)")
    func serverThreadAnswersAreTimed() async throws {
        let stack = try await TokenRelayStack(name: "e2e_monitoring_server_thread")
        defer { stack.stop() }
        let account = try await stack.signInAccountId()
        let body: [String: Any] = ["account_id": account, "scopes": ["User.Read"]]
        #expect(try await stack.request("POST", "/v1/tokens/silent", json: body).status == 200)
        #expect(try await stack.request("GET", "/healthz", authenticated: false).status == 200)
        let before = try await stack.request("GET", "/metrics", authenticated: false).text

        var ids: [String] = []
        for round in 0..<10 {
            let id = "timed-\(round)-" + UUID().uuidString.lowercased()
            ids.append(id)
            let hit = try await stack.request("POST", "/v1/tokens/silent", json: body, headers: ["client-request-id": id])
            #expect(hit.status == 200 && hit.json["source"] as? String == "cache")
            #expect(try await stack.request("GET", "/healthz", authenticated: false).status == 200)
            #expect(try await stack.request("GET", "/v1/nothing-here").status == 404)
            #expect(try await stack.request("GET", "/v1/accounts", authenticated: false).status == 401)
        }
        try await Task.sleep(for: .milliseconds(50))
        let log = stack.relay.log()
        for id in ids {
            let line = log.split(separator: "\n").last { $0.contains("\"request.completed\"") && $0.contains(id) }
            #expect(line?.contains(#""request.step":"server_thread""#) == true, "\(id) was not answered on the server thread: \(String(describing: line))")
        }
        let after = try await stack.request("GET", "/metrics", authenticated: false).text
        for (route, status) in [("/v1/tokens/silent", "200"), ("/healthz", "200"), ("unmatched", "404"), ("/v1/accounts", "401")] {
            let timed = #"tokenrelay_http_request_duration_seconds_count{route="\#(route)"}"#
            let counted = #"tokenrelay_http_requests_total{route="\#(route)",status="\#(status)"}"#
            #expect(Self.sample(after, timed) - Self.sample(before, timed) == 10, "\(timed)")
            #expect(Self.sample(after, counted) - Self.sample(before, counted) == 10, "\(counted)")
        }
    }

    /// Problems with a text exposition: a family announced twice, or its samples not in one group
    /// (both make Prometheus reject the scrape).
    static func exposition(_ text: String) -> [String] {
        var problems: [String] = []
        var types: [String: String] = [:]
        var finished = Set<String>()
        var current: String?
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ")
            var family: String
            if line.hasPrefix("# TYPE "), parts.count == 4 {
                family = String(parts[2])
                if types[family] != nil { problems.append("\(family) announced twice") }
                types[family] = String(parts[3])
            } else if line.hasPrefix("#") {
                continue
            } else {
                family = String(line.prefix { $0 != "{" && $0 != " " })
                for suffix in ["_bucket", "_sum", "_count"] where family.hasSuffix(suffix) {
                    let base = String(family.dropLast(suffix.count))
                    if types[base] == "histogram" { family = base }
                }
            }
            if family != current {
                if let current { finished.insert(current) }
                if finished.contains(family) { problems.append("\(family) samples are not in one group") }
                current = family
            }
        }
        return problems
    }

    @Test("A family announced twice or split in two groups is caught")
    func badExpositionIsCaught() {
        #expect(Self.exposition("# TYPE a counter\na 1\n# TYPE b gauge\nb 2\n").isEmpty)
        #expect(!Self.exposition("# TYPE a gauge\na 1\n# TYPE a gauge\na 2\n").isEmpty)
        #expect(!Self.exposition("# TYPE a counter\na{x=\"1\"} 1\n# TYPE b gauge\nb 2\na{x=\"2\"} 1\n").isEmpty)
    }

    @Test("A name the service does not expose is caught")
    func unknownNameIsCaught() {
        let exposed = Self.exposedSeries("# TYPE tokenrelay_a_total counter\n# TYPE tokenrelay_b_seconds histogram\n")
        #expect(exposed.contains("tokenrelay_b_seconds_bucket"))
        #expect(!exposed.contains("tokenrelay_c_total"))
        #expect(!exposed.contains("tokenrelay_a_total_bucket"))
    }
}
