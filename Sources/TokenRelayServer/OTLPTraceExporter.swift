import Foundation
import HTTPClientBridge
import HTTPCommon
import Synchronization
import TokenRelayBase

/// Sends the spans the ``Tracer`` queued to the OTLP/HTTP receiver (behaviour §8.11):
/// `POST {TOKENRELAY_OTLP_ENDPOINT}/v1/traces`, `Content-Type: application/json`, batches of at
/// most 512 every `TOKENRELAY_OTLP_INTERVAL_MS` (at once when a batch is full), through the
/// service's HTTP client. No request waits for it and it holds no PostgreSQL connection. A batch
/// the receiver refused or did not answer is given up and counted
/// (`tokenrelay_trace_spans_failed_total`): spans are worth less than memory. When stopped, it
/// sends what is queued within what is left of the shutdown grace (``beginGrace()``).
package final class OTLPTraceExporter: Service {
    package let name = "OTLPTraceExporter"
    private let tracer: Tracer
    private let url: String
    private let http: HTTPClient
    private let serviceName: String
    private let intervalSeconds: Double
    private let graceSeconds: Double
    private let exported: Metrics.Counter
    private let failed: Metrics.Counter
    private let logger: Logger
    /// Resumed when a full batch waits (the tracer's nudge) or the service stops.
    private let wake = Mutex<CheckedContinuation<Void, Never>?>(nil)
    private let graceDeadline = Mutex<ContinuousClock.Instant?>(nil)
    /// Failures logged at most once a minute (a receiver that is down would log every interval).
    private let lastWarning = Mutex<ContinuousClock.Instant?>(nil)

    /// - Parameters:
    ///   - endpoint: the receiver's base URL; `/v1/traces` is appended (OTLP/HTTP's signal path).
    ///   - graceSeconds: `TOKENRELAY_SHUTDOWN_TIMEOUT_S`: the final export ends within it.
    package init(
        tracer: Tracer, endpoint: String, http: HTTPClient, serviceName: String, intervalMilliseconds: Int, graceSeconds: Double, metrics: Metrics,
        logger: Logger
    ) {
        self.tracer = tracer
        url = Self.tracesURL(endpoint)
        self.http = http
        self.serviceName = serviceName
        intervalSeconds = Double(intervalMilliseconds) / 1000
        self.graceSeconds = graceSeconds
        exported = metrics.counter("tokenrelay_trace_spans_exported_total")
        failed = metrics.counter("tokenrelay_trace_spans_failed_total")
        self.logger = logger
        tracer.onBatchReady { [weak self] in self?.nudge() }
    }

    /// `{endpoint}/v1/traces`, without doubling a trailing `/`.
    package static func tracesURL(_ endpoint: String) -> String {
        var base = endpoint
        while base.hasSuffix("/") { base.removeLast() }
        return base + "/v1/traces"
    }

    /// Starts the final export's clock: the service group's shutdown began.
    package func beginGrace() {
        graceDeadline.withLock { $0 = $0 ?? .now + .seconds(graceSeconds) }
    }

    package func run() async {
        while !Task.isCancelled {
            await waitForInterval()
            while !Task.isCancelled, await exportBatch(timeout: 10) {}
        }
        // Stopping: what is queued goes now, in a task of its own (this one is cancelled, and a
        // cancelled task's HTTP call is abandoned), within the grace left (at least a second).
        let deadline = graceDeadline.withLock { $0 } ?? .now + .seconds(graceSeconds)
        await Task { [self] in
            while true {
                let left = ContinuousClock.now.duration(to: deadline)
                let seconds = max(1, Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18)
                guard await exportBatch(timeout: min(seconds, 10)), tracer.count > 0, ContinuousClock.now < deadline else { return }
            }
        }.value
    }

    /// Sends one batch.
    /// - Returns: whether a full batch went (another may be waiting).
    @discardableResult
    package func exportBatch(timeout: Double) async -> Bool {
        let spans = tracer.take()
        guard !spans.isEmpty else { return false }
        var headers = HTTPHeaders()
        headers.set("Content-Type", "application/json")
        let body = OTLPTraceJSON.encode(spans, serviceName: serviceName, serviceVersion: BuildInfo.releaseId)
        let request = HTTPClientRequest(method: "POST", url: url, headers: headers, body: body, timeout: timeout)
        var reason: String?
        do {
            let response = try await http.execute(request)
            // OTLP/HTTP: 200 is success (a partial success names what was rejected, counted as exported here).
            if (200..<300).contains(response.status) {
                exported.add(spans.count)
            } else {
                reason = "status \(response.status)"
            }
        } catch let error as HTTPClientError {
            reason = error.kind.rawValue
        } catch {
            reason = "cancelled"
        }
        if let reason {
            failed.add(spans.count)
            warnAtMostOnceAMinute(reason, spans: spans.count)
        }
        return spans.count == tracer.batchSize
    }

    private func warnAtMostOnceAMinute(_ reason: String, spans: Int) {
        let now = ContinuousClock.now
        let due = lastWarning.withLock { last in
            guard last.map({ $0.duration(to: now) >= .seconds(60) }) ?? true else { return false }
            last = now
            return true
        }
        if due { logger.warn("trace.export_failed", ["error": reason, "spans.count": String(spans)]) }
    }

    /// Sleeps for the interval, or until a full batch waits or the task is cancelled.
    private func waitForInterval() async {
        let interval = intervalSeconds
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: .seconds(interval)) }
            group.addTask { [self] in
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        let resumeNow = wake.withLock { waiting -> Bool in
                            waiting = continuation
                            return Task.isCancelled
                        }
                        if resumeNow { nudge() }
                    }
                } onCancel: {
                    nudge()
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    private func nudge() {
        wake.withLock { waiting in
            waiting?.resume()
            waiting = nil
        }
    }
}
