import Foundation
import HTTPClientBridge
import IdentityCore
import TokenRelayBase

/// The throttle memory as one layer around the retry loop (behaviour §5 "Throttle memory", STYLE:
/// throttling as a layer around the HTTP client, as msal-python's `throttled_http_client.py`),
/// used for the STS and every downstream API: a request whose key the memory holds is not sent;
/// a 429 or 503 with `Retry-After` that ends the loop is remembered for its key, so the upstream
/// sees nothing more from this replica for that key before the time it named.
///
/// The caller chooses the key (``ThrottleMemory/stsKey(clientId:authority:scopes:account:)``,
/// ``ThrottleMemory/downstreamKey(api:identity:path:accountId:)``) and turns ``HeldBack`` into its own
/// answer (429 `throttled` with `Retry-After`).
package struct ThrottledHTTPClient: Sendable {
    /// A request the memory held back: nothing was sent.
    package struct HeldBack: Error, Sendable, Equatable {
        /// The upstream's status that asked to wait (429 or 503).
        package let status: Int
        /// Whole seconds until the upstream accepts the request again (rounded up, at least 1).
        package let remainingSeconds: Int

        package init(status: Int, remainingSeconds: Int) {
            self.status = status
            self.remainingSeconds = remainingSeconds
        }
    }

    /// Why ``send(_:throttleKey:policy:target:context:classify:)`` has no answer to give.
    package enum Failure: Error, Sendable {
        /// The memory held the request back.
        case heldBack(HeldBack)
        /// The retry loop's problem: 504 `upstream_unavailable` when the deadline passed before an
        /// attempt.
        case problem(RelayError)
    }

    package let retrying: RetryingHTTPClient
    /// Shared by copies: one memory per caller (STS client, downstream service).
    package let memory: ThrottleMemory

    package init(retrying: RetryingHTTPClient, memory: ThrottleMemory) {
        self.retrying = retrying
        self.memory = memory
    }

    package var clock: UpstreamClock { retrying.clock }
    package var metrics: Metrics { retrying.metrics }

    /// Fails fast when the memory holds `key`, counting `tokenrelay_throttled_total{target,
    /// reason="memory"}`. ``send(_:throttleKey:policy:target:context:classify:)`` asks too; a caller
    /// asks first when preparing the request costs something (a token acquisition, a signed client
    /// assertion) that a held-back request should not.
    /// - Parameter target: a bounded label for metrics (`sts`, `downstream`).
    /// - Throws: ``HeldBack`` while the memory holds `key`.
    package func admit(_ key: ThrottleMemory.Key, target: String) throws(HeldBack) {
        guard let (entry, remaining) = memory.recall(key, now: clock.now()) else { return }
        metrics.increment("tokenrelay_throttled_total", ["target": target, "reason": "memory"])
        throw HeldBack(status: entry.status, remainingSeconds: remaining)
    }

    /// Sends `request` through the retry loop unless the memory holds `throttleKey`, and remembers
    /// the `Retry-After` (delta-seconds or HTTP-date, RFC 9110 §10.2.3) of a 429 or 503 the loop
    /// gave up on. A 429/503 waited for and then answered is not remembered: the wait is over.
    /// - Parameters:
    ///   - throttleKey: what makes two requests identical for the memory.
    ///   - target: a bounded label for metrics and logs (`sts`, `downstream`).
    ///   - classify: what an attempt's answer or failure means to the policy.
    /// - Returns: what the last attempt produced, and the policy's final decision.
    /// - Throws: ``Failure``: held back (nothing sent), or the deadline passed.
    package func send(
        _ request: HTTPClientRequest, throttleKey: ThrottleMemory.Key, policy: RetryPolicy, target: String, context: RequestContext,
        classify: (Result<HTTPClientResponse, HTTPClientError>) -> RetryPolicy.Outcome
    ) async throws(Failure) -> RetryingHTTPClient.Final {
        do { try admit(throttleKey, target: target) } catch { throw .heldBack(error) }
        let final: RetryingHTTPClient.Final
        do {
            final = try await retrying.send(request, policy: policy, target: target, context: context, classify: classify)
        } catch {
            throw .problem(error)
        }
        if case .giveUp = final.decision, case .success(let response) = final.last, response.status == 429 || response.status == 503,
            let seconds = RetryAfter.seconds(response.headers["Retry-After"], now: clock.now())
        {
            memory.remember(throttleKey, seconds: seconds, status: response.status, now: clock.now())
        }
        return final
    }
}
