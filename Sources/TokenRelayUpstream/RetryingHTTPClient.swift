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
            let result: Result<HTTPClientResponse, HTTPClientError>
            do {
                result = .success(try await http.execute(attemptRequest))
            } catch let error as HTTPClientError {
                result = .failure(error)
            } catch {
                result = .failure(HTTPClientError(kind: .other, requestSent: true, function: "HTTPClient.execute", reason: "cancelled"))
            }
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

extension RetryPolicy.Outcome {
    /// A transport failure as the policy sees it. A timeout before any byte of the request went
    /// out (connecting) is a network error with nothing sent: safe to retry for every method.
    package init(_ error: HTTPClientError) {
        self = error.kind == .timedOut && error.requestSent ? .timedOut : .networkError(requestSent: error.requestSent)
    }
}
