import Foundation
import Synchronization

/// Prometheus counters and histograms for `/metrics` (behaviour §8), kept in this process.
///
/// Labels are bounded: routes are templates, never raw paths; outcomes are short codes.
public final class Metrics: Sendable {
    private struct State {
        var counters: [String: [String: Double]] = [:]  // name → rendered labels → value
        var histograms: [String: [String: Histogram]] = [:]
        var help: [String: (type: String, text: String)] = [:]
        var handles: [String: [String: Counter]] = [:]  // name → rendered labels → lock-free counter
        var gauges: [String: [String: Double]] = [:]  // name → rendered labels → last value set
        var histogramHandles: [String: [String: HistogramSeries]] = [:]  // name → rendered labels → handle
    }

    package struct Histogram: Sendable {
        package static let bounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
        package var buckets = [UInt64](repeating: 0, count: bounds.count)
        package var count: UInt64 = 0
        package var sum: Double = 0

        package mutating func observe(_ value: Double) {
            for (index, bound) in Self.bounds.enumerated() where value <= bound { buckets[index] += 1 }
            count += 1
            sum += value
        }

        package mutating func add(_ other: Histogram) {
            for index in buckets.indices { buckets[index] += other.buckets[index] }
            count += other.count
            sum += other.sum
        }
    }

    private let state = Mutex(State())
    /// `tokenrelay_token_cache_total{outcome="hit",layer="memory"}`, bumped on every cached
    /// silent answer and so resolved once (behaviour §10).
    public let memoryCacheHits = Counter()
    /// Gauges computed when scraped (pool use, cache size).
    private let gauges: Mutex<[@Sendable () -> [(name: String, labels: [String: String], value: Double)]]> = Mutex([])

    public init() {
        describe("tokenrelay_http_requests_total", "counter", "HTTP requests by route template and status.")
        describe("tokenrelay_http_request_duration_seconds", "histogram", "HTTP request latency by route template.")
        describe(
            "tokenrelay_token_cache_total", "counter", "Silent token requests by cache outcome (hit, miss).",
            series: [["outcome": "hit", "layer": "memory"], ["outcome": "hit", "layer": "database"], ["outcome": "miss"], ["outcome": "extended_lifetime"]])
        // Every grant TokenRelay sends, with the outcomes alerts count (deploy/monitoring); the
        // other outcomes (problem codes, transport failures) appear when they first happen.
        describe(
            "tokenrelay_sts_requests_total", "counter", "Token endpoint calls by grant and outcome.",
            series: ["authorization_code", "refresh_token", "client_credentials", "urn:ietf:params:oauth:grant-type:jwt-bearer"].flatMap { grant in
                ["success", "interaction_required"].map { ["grant": grant, "outcome": $0] }
            })
        describe("tokenrelay_retries_total", "counter", "Retried upstream attempts by target.", series: [["target": "sts"], ["target": "downstream"]])
        describe(
            "tokenrelay_throttled_total", "counter", "Requests answered throttled.",
            series: ["sts", "downstream"].flatMap { target in ["memory", "upstream"].map { ["target": target, "reason": $0] } })
        describe("tokenrelay_refresh_coalesced_total", "counter", "Refreshes that joined one already in flight.", series: [[:]])
        describe("tokenrelay_sts_request_duration_seconds", "histogram", "Token endpoint call latency by grant, retries included.")
        describe("tokenrelay_ready", "gauge", "Last readiness result (a /readyz probe or the periodic self-check): 1 pass or warn, 0 fail.")
        describe("tokenrelay_ready_checked_timestamp_seconds", "gauge", "When readiness was last checked, unix seconds.")
        let hits = memoryCacheHits
        state.withLock { $0.handles["tokenrelay_token_cache_total", default: [:]][Self.render(["outcome": "hit", "layer": "memory"])] = hits }
    }

    /// Announces a family (its `# HELP` and `# TYPE` lines, shown before its first sample).
    /// - Parameter series: for a counter, the label sets known up front (`[["outcome": "failed"], ...]`,
    ///   `[[:]]` for one without labels): each shows a sample of 0 from start-up instead of none
    ///   until its first increment, so `rate()`, `increase()` and alerts on them see the first one.
    ///   Only bounded, fixed values: never a route, a status or a code from outside.
    package func describe(_ name: String, _ type: String, _ text: String, series: [[String: String]] = []) {
        let keys = series.map(Self.render)
        state.withLock { state in
            state.help[name] = (type, text)
            for key in keys where state.counters[name]?[key] == nil { state.counters[name, default: [:]][key] = 0 }
        }
    }

    public func increment(_ name: String, _ labels: [String: String] = [:], by amount: Double = 1) {
        let key = Self.render(labels)
        state.withLock { $0.counters[name, default: [:]][key, default: 0] += amount }
    }

    /// The lock-free handle of one counter series, created on first use; the same series can
    /// still be bumped through ``increment(_:_:by:)`` (the two add up).
    public func counter(_ name: String, _ labels: [String: String] = [:]) -> Counter {
        let key = Self.render(labels)
        return state.withLock { state in
            if let existing = state.handles[name]?[key] { return existing }
            let created = Counter()
            state.handles[name, default: [:]][key] = created
            return created
        }
    }

    /// The handle of one histogram series, created on first use; observations through it and
    /// through ``observe(_:_:seconds:)`` add up.
    package func histogram(_ name: String, _ labels: [String: String] = [:]) -> HistogramSeries {
        let key = Self.render(labels)
        return state.withLock { state in
            if let existing = state.histogramHandles[name]?[key] { return existing }
            let created = HistogramSeries()
            state.histogramHandles[name, default: [:]][key] = created
            return created
        }
    }

    public func observe(_ name: String, _ labels: [String: String] = [:], seconds: Double) {
        let key = Self.render(labels)
        state.withLock { $0.histograms[name, default: [:]][key, default: Histogram()].observe(seconds) }
    }

    /// Sets a gauge to a value (kept until set again).
    public func set(_ name: String, _ labels: [String: String] = [:], value: Double) {
        let key = Self.render(labels)
        state.withLock { $0.gauges[name, default: [:]][key] = value }
    }

    /// Registers families read at scrape time (pool use, cache sizes, `process_*`): each typed and
    /// described by ``describe(_:_:_:)`` (a gauge when it is not), its samples together.
    public func addGauges(_ read: @escaping @Sendable () -> [(name: String, labels: [String: String], value: Double)]) {
        gauges.withLock { $0.append(read) }
    }

    /// The current value of a counter (tests and health checks).
    public func value(_ name: String, _ labels: [String: String] = [:]) -> Double {
        let key = Self.render(labels)
        return state.withLock { ($0.counters[name]?[key] ?? 0) + ($0.handles[name]?[key]?.value ?? 0) }
    }

    /// Prometheus text exposition format 0.0.4.
    public func render() -> String {
        var lines: [String] = []
        var snapshot = state.withLock { $0 }
        for (name, series) in snapshot.histogramHandles {
            for (labels, handle) in series {
                let observed = handle.snapshot
                guard observed.count > 0 else { continue }
                snapshot.histograms[name, default: [:]][labels, default: Histogram()].add(observed)
            }
        }
        var counters = snapshot.counters
        for (name, series) in snapshot.handles {
            for (labels, handle) in series where handle.value > 0 {
                counters[name, default: [:]][labels, default: 0] += handle.value
            }
        }
        // Families read at scrape time (pool use, cache sizes, process_*) are read first, so a
        // described one is announced once, with its samples.
        var scraped: [(name: String, samples: [String])] = []
        var scrapedIndex: [String: Int] = [:]
        for read in gauges.withLock({ $0 }) {
            for gauge in read() {
                let line = "\(gauge.name)\(Self.render(gauge.labels)) \(Self.format(gauge.value))"
                if let index = scrapedIndex[gauge.name] {
                    scraped[index].samples.append(line)
                } else {
                    scrapedIndex[gauge.name] = scraped.count
                    scraped.append((gauge.name, [line]))
                }
            }
        }
        // Every described metric is announced even before its first sample, so dashboards and
        // alert rules can be checked against /metrics (deploy/monitoring).
        let described = { (type: String) in snapshot.help.filter { $0.value.type == type && scrapedIndex[$0.key] == nil }.map(\.key) }
        func announce(_ name: String, _ type: String) {
            let help = snapshot.help[name]
            lines += ["# HELP \(name) \(help?.text ?? name)", "# TYPE \(name) \(help?.type ?? type)"]
        }
        for name in Set(counters.keys).union(described("counter")).sorted() {
            announce(name, "counter")
            for (labels, value) in (counters[name] ?? [:]).sorted(by: { $0.key < $1.key }) {
                lines.append("\(name)\(labels) \(Self.format(value))")
            }
        }
        for name in Set(snapshot.gauges.keys).union(described("gauge")).sorted() {
            announce(name, "gauge")
            for (labels, value) in (snapshot.gauges[name] ?? [:]).sorted(by: { $0.key < $1.key }) {
                lines.append("\(name)\(labels) \(Self.format(value))")
            }
        }
        for name in Set(snapshot.histograms.keys).union(described("histogram")).sorted() {
            announce(name, "histogram")
            for (labels, histogram) in (snapshot.histograms[name] ?? [:]).sorted(by: { $0.key < $1.key }) {
                let inner = labels.isEmpty ? "" : String(labels.dropFirst().dropLast()) + ","
                for (index, bound) in Histogram.bounds.enumerated() {
                    lines.append("\(name)_bucket{\(inner)le=\"\(Self.format(bound))\"} \(histogram.buckets[index])")
                }
                lines.append("\(name)_bucket{\(inner)le=\"+Inf\"} \(histogram.count)")
                lines.append("\(name)_sum\(labels) \(Self.format(histogram.sum))")
                lines.append("\(name)_count\(labels) \(histogram.count)")
            }
        }
        for family in scraped {
            announce(family.name, "gauge")
            lines += family.samples
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func render(_ labels: [String: String]) -> String {
        guard !labels.isEmpty else { return "" }
        // Written as bytes into one buffer, one label without sorting a copy: a `String` grown
        // piece by piece over the sorted labels cost about 4k instructions a call (a forced
        // refresh renders four, behaviour §10).
        var out: [UInt8] = []
        out.reserveCapacity(64)
        out.append(UInt8(ascii: "{"))
        if labels.count == 1, let (key, value) = labels.first {
            write(key, value, into: &out)
        } else {
            for (index, (key, value)) in labels.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                write(key, value, into: &out)
            }
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    /// `key="value"`, the value escaped per the exposition format (backslash, double quote and
    /// line feed; most values need none).
    private static func write(_ key: String, _ value: String, into out: inout [UInt8]) {
        out += key.utf8
        out.append(UInt8(ascii: "="))
        out.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\n"): out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    private static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
