import Foundation
import HTTPClientBridge
import IdentityCore
import TokenRelayBase

/// The one retry loop of behaviour §5 around the HTTP client, used for the STS and every downstream
/// API: each attempt gets what is left of the request's deadline (at most 30 s), IdentityCore's
/// `RetryPolicy` decides after every answer or failure, and waits happen here only.
package struct RetryingHTTPClient: Sendable {
    package let http: HTTPClient
    package let metrics: Metrics
    package let logger: Logger
    /// Time, waits and jitter (injected in tests).
    package var clock: UpstreamClock = .system

    package init(http: HTTPClient, metrics: Metrics, logger: Logger, clock: UpstreamClock = .system) {
        self.http = http
        self.metrics = metrics
        self.logger = logger
        self.clock = clock
    }

    /// What the last attempt produced, and the policy's final decision (`accept` or `giveUp`).
    package struct Final {
        package let last: Result<HTTPClientResponse, HTTPClientError>
        package let decision: RetryPolicy.Decision
    }

    /// Sends `request` until `policy` accepts the outcome or gives up.
    /// - Parameters:
    ///   - target: a bounded label for metrics and logs (`sts`, `downstream`).
    ///   - classify: what an attempt's answer or failure means to the policy.
    /// - Throws: `RelayError` 504 `upstream_unavailable` when the deadline passes before an attempt.
    package func send(
        _ request: HTTPClientRequest, policy: RetryPolicy, target: String, context: RequestContext,
        classify: (Result<HTTPClientResponse, HTTPClientError>) -> RetryPolicy.Outcome
    ) async throws(RelayError) -> Final {
        var attempt = 1
        while true {
            let remaining = context.deadline.timeIntervalSince(clock.now())
            guard remaining > 0.05 else { throw RelayError.deadlinePassed(before: target) }
            var attemptRequest = request
            attemptRequest.timeout = min(max(remaining, context.minimumAttemptSeconds), 30)
            if let cutoff = context.attemptCutoff {
                let beforeCutoff = cutoff.timeIntervalSince(clock.now())
                guard beforeCutoff > 0.05 else { throw RelayError.deadlinePassed(before: target) }
                attemptRequest.timeout = min(attemptRequest.timeout, beforeCutoff)
            }
            // Each attempt is a client span of the request's (behaviour §8.11), and the upstream
            // gets that span's id as its parent, never the caller's.
            let span = Tracing.current?.child(request.method + " " + target, kind: .client)
            if let span {
                attemptRequest.headers.set("traceparent", span.context.traceparent)
                if let state = span.context.traceState { attemptRequest.headers.set("tracestate", state) } else { attemptRequest.headers.remove("tracestate") }
            }
            let result: Result<HTTPClientResponse, HTTPClientError>
            do {
                result = .success(try await http.execute(attemptRequest))
            } catch let error as HTTPClientError {
                result = .failure(error)
            } catch {
                result = .failure(HTTPClientError(kind: .other, requestSent: true, function: "HTTPClient.execute", reason: "cancelled"))
            }
            if let span, span.isRecorded { Self.end(span, request: attemptRequest, target: target, attempt: attempt, result: result) }
            let decision = policy.decide(
                attempt: attempt, outcome: classify(result), deadlineRemaining: context.deadline.timeIntervalSince(clock.now()), random: clock.random())
            guard case .retry(let delay) = decision else { return Final(last: result, decision: decision) }
            metrics.increment("tokenrelay_retries_total", ["target": target])
            logger.info(
                "upstream.retry",
                [
                    "upstream.target": target, "upstream.attempt": String(attempt), "retry.delay_s": String(format: "%.2f", delay),
                    "correlation.id": context.correlationId,
                ])
            await clock.sleep(delay)
            attempt += 1
        }
    }
}

extension RetryingHTTPClient {
    /// Ends an attempt's span with OpenTelemetry's HTTP client attributes: the method, the
    /// upstream's host and port (never the path or query, which may name a user), the status,
    /// `error.type` (the status of a 4xx/5xx, or how the transport failed), the resend count, and
    /// which upstream (`tokenrelay.upstream`: `sts`, `downstream`).
    static func end(_ span: OpenSpan, request: HTTPClientRequest, target: String, attempt: Int, result: Result<HTTPClientResponse, HTTPClientError>) {
        var attributes: [(String, SpanRecord.Value)] = [("http.request.method", .string(request.method)), ("tokenrelay.upstream", .string(target))]
        let (host, port) = hostAndPort(request.url)
        if let host { attributes.append(("server.address", .string(host))) }
        if let port { attributes.append(("server.port", .int(port))) }
        if attempt > 1 { attributes.append(("http.request.resend_count", .int(attempt - 1))) }
        var failed = false
        switch result {
        case .success(let response):
            attributes.append(("http.response.status_code", .int(response.status)))
            if response.status >= 400 {
                attributes.append(("error.type", .string(String(response.status))))
                failed = true
            }
        case .failure(let error):
            attributes.append(("error.type", .string(error.kind.rawValue)))
            failed = true
        }
        span.end(attributes, failed: failed)
    }

    /// The authority of an absolute URL as host and explicit port (`https://host:8443/...`);
    /// an IPv6 host without its brackets.
    static func hostAndPort(_ url: String) -> (String?, Int?) {
        guard let scheme = url.range(of: "://") else { return (nil, nil) }
        let rest = url[scheme.upperBound...]
        var authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            let host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            return (host, after.hasPrefix(":") ? Int(after.dropFirst()) : nil)
        }
        if let colon = authority.lastIndex(of: ":") {
            return (String(authority[..<colon]), Int(authority[authority.index(after: colon)...]))
        }
        return (authority.isEmpty ? nil : String(authority), nil)
    }
}

extension RetryPolicy.Outcome {
    /// A transport failure as the policy sees it. A timeout before any byte of the request went
    /// out (connecting) is a network error with nothing sent: safe to retry for every method.
    package init(_ error: HTTPClientError) {
        self = error.kind == .timedOut && error.requestSent ? .timedOut : .networkError(requestSent: error.requestSent)
    }
}
