import Foundation
import HTTPCommon
import Synchronization
import TokenRelayBase

/// One API key's request budget in this replica (`TOKENRELAY_RATE_LIMIT_PER_KEY`, behaviour §11): a
/// token bucket refilled at `rate` requests per second, holding at most `rate` (at least one)
/// so a key may burst one second's worth. Each key has its own bucket and lock, so keys never
/// contend with each other; the limit applies per replica.
package final class RateBucket: Sendable {
    private struct State {
        var tokens: Double
        var updatedAt: Double
    }

    /// Requests per second.
    package let rate: Double
    /// Most requests taken back to back.
    package let capacity: Double
    private let state: Mutex<State>

    /// - Parameters:
    ///   - rate: requests per second, > 0.
    ///   - now: the current time in seconds of a monotonic clock.
    package init(rate: Double, now: Double) {
        self.rate = rate
        capacity = max(1, rate)
        state = Mutex(State(tokens: max(1, rate), updatedAt: now))
    }

    /// Takes one request from the budget.
    /// - Parameter now: the current time in seconds of the same monotonic clock.
    /// - Returns: nil when the request may go ahead, else the seconds until one would be allowed.
    package func take(now: Double) -> Double? {
        state.withLock { state in
            let elapsed = max(0, now - state.updatedAt)
            state.tokens = min(capacity, state.tokens + elapsed * rate)
            state.updatedAt = now
            if state.tokens >= 1 {
                state.tokens -= 1
                return nil
            }
            return (1 - state.tokens) / rate
        }
    }

    /// Returns one request taken by ``take(now:)`` that was not answered after all.
    package func giveBack() {
        state.withLock { $0.tokens = min(capacity, $0.tokens + 1) }
    }

    /// 429 `rate_limited` with `Retry-After` and `retry_after_s` (whole seconds, at least 1).
    package static func rateLimited(wait: Double) -> RelayError {
        let seconds = max(1, Int(wait.rounded(.up)))
        var error = RelayError(
            .rateLimited, "This API key exceeded its request rate in this replica; retry after \(seconds) s.",
            extensions: ["retry_after_s": .number(Double(seconds))])
        error.retryAfterSeconds = seconds
        return error
    }
}
