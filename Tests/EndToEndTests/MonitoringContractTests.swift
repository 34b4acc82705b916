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
        for file in ["prometheus-rules.yaml", "prometheusrule.yaml", "grafana-dashboard.json"] {
            #expect(used[file]?.isEmpty == false, "\(file) names no tokenrelay_ metric")
        }

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

    /// The alerts count increases of these series (deploy/monitoring): absent until their first
    /// increment, that first one was never seen (found by the new-user try).
    @Test("Before any traffic, the counters alerts watch show 0 for their known label values, and the scrape stays bounded")
    func countersStartAtZero() async throws {
        let stack = try await TokenRelayStack(name: "e2e_monitoring_zero")
        defer { stack.stop() }
        let text = try await stack.request("GET", "/metrics", authenticated: false).text
        for series in [
            #"tokenrelay_webhook_deliveries_total{outcome="delivered"} 0"#, #"tokenrelay_webhook_deliveries_total{outcome="unreachable"} 0"#,
            #"tokenrelay_sts_requests_total{grant="refresh_token",outcome="interaction_required"} 0"#,
            #"tokenrelay_refresh_total{outcome="takeover_refused"} 0"#, #"tokenrelay_throttled_total{reason="upstream",target="downstream"} 0"#,
            #"tokenrelay_keepalive_total{outcome="failed"} 0"#, #"tokenrelay_issuance_flushes_total{outcome="failed"} 0"#,
            #"tokenrelay_audit_pruned_total{table="audit_events"} 0"#, "tokenrelay_events_pruned_total 0",
            "tokenrelay_invalidation_listener_reconnects_total 0",
        ] {
            #expect(text.contains(series + "\n"), "\(series) missing from\n\(text)")
        }
        let samples = text.split(separator: "\n").filter { !$0.hasPrefix("#") }
        print("monitoring: an idle scrape holds \(samples.count) samples, \(text.utf8.count) bytes")
        #expect(samples.count < 400, "\(samples.count) samples")
        let run = try await Self.promtoolCheckMetrics(text)
        #expect(run.status == 0 && run.output.isEmpty && run.error.isEmpty, "promtool check metrics: \(run.output)\(run.error)")
    }

    /// Runs Debian's `promtool check metrics` (package `prometheus`, scripts/install-deps) on an exposition.
    static func promtoolCheckMetrics(_ exposition: String) async throws -> BuiltProducts.Run {
        let path = NSTemporaryDirectory() + "/tokenrelay-scrape-\(UUID().uuidString.prefix(8)).prom"
        try exposition.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool") else {
            throw TestFailure("promtool is missing: scripts/install-deps installs Debian's prometheus package")
        }
        return try await BuiltProducts.run(executableAt: "/bin/sh", ["-c", "exec /usr/bin/promtool check metrics < \"$0\"", path], environment: nil)
    }

    @Test("A live scrape passes promtool check metrics: counters typed as counters, HELP on every family, build info, process_* (issue 28)")
    func liveScrapePassesPromtool() async throws {
        let stack = try await TokenRelayStack(name: "e2e_monitoring_promtool")
        defer { stack.stop() }
        // Traffic first, so the labelled families have samples: a sign-in, a refresh, a cache hit, a 404, a 401.
        let account = try await stack.signInAccountId()
        let body: [String: Any] = ["account_id": account, "scopes": ["User.Read"], "force_refresh": true]
        #expect(try await stack.request("POST", "/v1/tokens/silent", json: body).status == 200)
        #expect(try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": account, "scopes": ["User.Read"]]).status == 200)
        #expect(try await stack.request("GET", "/v1/nothing-here").status == 404)
        #expect(try await stack.request("GET", "/v1/accounts", authenticated: false).status == 401)
        let text = try await stack.request("GET", "/metrics", authenticated: false).text

        let run = try await Self.promtoolCheckMetrics(text)
        #expect(run.status == 0, "promtool check metrics: \(run.output)\(run.error)")
        #expect(run.output.isEmpty && run.error.isEmpty, "promtool check metrics: \(run.output)\(run.error)")

        // HELP on every family, with words of its own (not the name repeated).
        var types: [String: String] = [:]
        var help: [String: String] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("# ") {
            let parts = line.split(separator: " ", maxSplits: 3)
            guard parts.count == 4 else { continue }
            if parts[1] == "TYPE" { types[String(parts[2])] = String(parts[3]) } else if parts[1] == "HELP" { help[String(parts[2])] = String(parts[3]) }
        }
        for family in types.keys.sorted() {
            #expect(help[family].map { $0 != family && $0.count > 10 } == true, "\(family) has no HELP of its own")
        }
        // Totals are counters; their old names stay, as gauges (dashboards built on them keep working).
        for (family, type) in [
            ("tokenrelay_db_pool_waits_total", "counter"), ("tokenrelay_memory_cache_evictions_total", "counter"),
            ("tokenrelay_db_pool_waits", "gauge"), ("tokenrelay_memory_cache_evictions", "gauge"), ("tokenrelay_build_info", "gauge"),
            ("process_cpu_seconds_total", "counter"), ("process_resident_memory_bytes", "gauge"), ("process_open_fds", "gauge"),
            ("process_start_time_seconds", "gauge"), ("process_max_fds", "gauge"), ("process_virtual_memory_bytes", "gauge"),
        ] {
            #expect(types[family] == type, "\(family) is \(types[family] ?? "absent"), not \(type)")
        }
        #expect(text.contains(#"tokenrelay_build_info{commit=""#) && text.contains(#",version="0.1.0"} 1"#), "build info")
        #expect(Self.sample(text, "tokenrelay_db_pool_waits_total") == Self.sample(text, "tokenrelay_db_pool_waits"))
        #expect(Self.sample(text, "process_resident_memory_bytes") > 1_000_000, "resident memory from /proc")
        #expect(Self.sample(text, "process_open_fds") > 5, "open descriptors from /proc")
        let started = Self.sample(text, "process_start_time_seconds")
        #expect(abs(started - Date().timeIntervalSince1970) < 600, "start time \(started)")
        #expect(Self.sample(text, "process_cpu_seconds_total") > 0)
    }

    @Test("promtool check metrics catches a total typed as a gauge, a counter without _total and a family without HELP")
    func promtoolCatchesWhatTheIssueNamed() async throws {
        for bad in [
            "# HELP a_total Things.\n# TYPE a_total gauge\na_total 1\n", "# HELP a Things.\n# TYPE a counter\na 1\n", "# TYPE a gauge\na 1\n",
        ] {
            #expect(try await Self.promtoolCheckMetrics(bad).status != 0, "\(bad)")
        }
        #expect(try await Self.promtoolCheckMetrics("# HELP a_total Things.\n# TYPE a_total counter\na_total 1\n").status == 0)
    }

    @Test("TOKENRELAY_MANAGEMENT_LISTEN serves /healthz, /readyz and /metrics on an address of their own, and the API's no longer (issue 28)")
    func managementListener() async throws {
        let stack = try await TokenRelayStack(name: "e2e_monitoring_management", environment: ["TOKENRELAY_MANAGEMENT_LISTEN": "127.0.0.1:0"])
        defer { stack.stop() }
        var port = 0
        _ = try await eventually(within: 10) {
            for line in stack.relay.log().split(separator: "\n") where line.contains(#""listen.role":"management""#) {
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { continue }
                port = (object["listen.port"] as? String).flatMap { Int($0) } ?? 0
            }
            return port != 0
        }
        #expect(port != 0, "no management listening line")
        let management = "http://127.0.0.1:\(port)"
        #expect(port != stack.relay.port)
        let live = try await stack.request("GET", management + "/healthz", authenticated: false)
        #expect(live.status == 200 && live.json["status"] as? String == "pass")
        let ready = try await stack.request("GET", management + "/readyz", authenticated: false)
        #expect(ready.status == 200 && ready.headers["Content-Type"] == "application/health+json")
        let metrics = try await stack.request("GET", management + "/metrics", authenticated: false)
        #expect(metrics.status == 200 && metrics.text.contains("# TYPE tokenrelay_http_requests_total counter"))
        // The API's address no longer answers them; the API is served there as before, and not on the management address.
        for path in ["/healthz", "/readyz", "/metrics"] {
            #expect(try await stack.request("GET", path, authenticated: false).status == 404, "\(path) on the API address")
        }
        #expect(try await stack.request("GET", "/v1/accounts").status == 200)
        #expect(try await stack.request("GET", management + "/v1/accounts").status == 404)
        // The management answers are counted like any others, and `token-relay healthcheck` asks the management address.
        #expect(metrics.text.contains(#"tokenrelay_http_requests_total{route="/healthz",status="200"} 1"#), "\(metrics.text.prefix(400))")
        let check = try await stack.runCommand(["healthcheck"], environment: ["TOKENRELAY_MANAGEMENT_LISTEN": "127.0.0.1:\(port)"])
        #expect(check.status == 0)
        let wrong = try await stack.runCommand(["healthcheck"], environment: ["TOKENRELAY_MANAGEMENT_LISTEN": "127.0.0.1:\(stack.relay.port)"])
        #expect(wrong.status == 1, "the API address answers /healthz 404 now")
    }

    @Test("tokenrelay_ready is set by the service's own periodic check when nothing probes /readyz, and follows the last check (issue 28)")
    func readinessGaugeWithoutProbes() async throws {
        let stack = try await TokenRelayStack(name: "e2e_monitoring_self_check", environment: ["TOKENRELAY_READINESS_CHECK_INTERVAL_S": "1"])
        defer { stack.stop() }
        // No /readyz request at all (systemd: nothing probes).
        var first = ""
        #expect(
            try await eventually(within: 10) {
                first = try await stack.request("GET", "/metrics", authenticated: false).text
                return first.contains("\ntokenrelay_ready 1\n")
            }, "the self-check ran at start")
        let checked = Self.sample(first, "tokenrelay_ready_checked_timestamp_seconds")
        #expect(abs(checked - Date().timeIntervalSince1970) < 30)
        // A migration the service does not know is pending: readiness fails, and the gauge follows within the interval.
        try await stack.withDatabase { _ = try $0.query("DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)") }
        #expect(
            try await eventually(within: 10) {
                try await stack.request("GET", "/metrics", authenticated: false).text.contains("\ntokenrelay_ready 0\n")
            })
        #expect(try await stack.request("GET", "/readyz", authenticated: false).status == 503)
    }

    @Test("At info, one access line per answer: route template, status, duration, key id, correlation id; no path, key or username (issue 28)")
    func accessLineAtInfo() async throws {
        let stack = try await TokenRelayStack(name: "e2e_monitoring_access_line", environment: ["TOKENRELAY_LOG_LEVEL": "info"])
        defer { stack.stop() }
        let account = try await stack.signInAccountId()
        let shown = try await stack.request("GET", "/v1/accounts/\(account)", headers: ["client-request-id": "access-1"])
        #expect(shown.status == 200)
        #expect(try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": account, "scopes": ["User.Read"]]).status == 200)
        let hit = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": account, "scopes": ["User.Read"]], headers: ["client-request-id": "access-2"])
        #expect(hit.status == 200)
        #expect(try await stack.request("GET", "/v1/accounts", headers: ["client-request-id": "access-3"], authenticated: false).status == 401)
        try await Task.sleep(for: .milliseconds(100))
        let lines = stack.relay.log().split(separator: "\n").filter { $0.contains(#""event":"request.completed""#) }
        func line(_ id: String) -> [String: String]? {
            lines.last { $0.contains(id) }.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String] }
        }
        let account1 = try #require(line("access-1"), "no access line at info: \(lines)")
        #expect(account1["level"] == "info" && account1["request.method"] == "GET" && account1["request.route"] == "/v1/accounts/{account_id}")
        #expect(account1["response.status"] == "200" && account1["api_key.id"] == stack.apiKeyId && account1["correlation.id"] == "access-1")
        #expect(Double(account1["duration_ms"] ?? "") ?? -1 >= 0 && account1["time"]?.hasSuffix("Z") == true)
        let cached = try #require(line("access-2"))
        #expect(cached["request.route"] == "/v1/tokens/silent" && cached["request.step"] == "server_thread" && cached["api_key.id"] == stack.apiKeyId)
        let refused = try #require(line("access-3"))
        #expect(refused["response.status"] == "401" && refused["api_key.id"] == nil)
        // Nothing of the request beyond those: not the path (the account id), the key, the username or the token.
        for text in lines.map(String.init) {
            #expect(!text.contains(account) && !text.contains(stack.apiKey) && !text.contains("alice@"), "\(text)")
            #expect(!text.contains(hit.json["access_token"] as? String ?? "-"), "\(text)")
            #expect(
                Set((try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String])?.keys.map { $0 } ?? []).isSubset(of: [
                    "time", "level", "event", "request.method", "request.route", "response.status", "duration_ms", "api_key.id", "correlation.id",
                    "request.step", "trace.parent",
                ]))
        }
        // At warn, none.
        try await stack.restartRelay(environment: ["TOKENRELAY_LOG_LEVEL": "warn"])
        #expect(try await stack.request("GET", "/v1/accounts/\(account)", headers: ["client-request-id": "access-4"]).status == 200)
        try await Task.sleep(for: .milliseconds(100))
        #expect(!stack.relay.log().contains("access-4"))
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
