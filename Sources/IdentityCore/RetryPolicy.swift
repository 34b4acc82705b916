import Foundation

/// The one retry policy for the STS and downstream APIs (behaviour §5), as a pure decision
/// function: the caller reports how an attempt ended and performs the decision; time and
/// randomness are injected.
///
/// Rules: 429 and 503 honour `Retry-After` (wait only if it is ≤ `maxRetryAfter` and ends
/// before the deadline; otherwise give up with that value); other 5xx (500, 502, 504), 408,
/// connection errors and timeouts back off exponentially with full jitter
/// (`random × min(maxDelay, baseDelay × 2^(attempt−1))`, AWS "Exponential Backoff and
/// Jitter"); the STS is retried after a 5xx without Retry-After or a network error once
/// only, as MSAL does ("MSAL.NET retry policy"), and never when the body is non-retryable;
/// a non-idempotent downstream call is retried only on 429, 503 with Retry-After, or when
/// no byte of the request was sent; at most `maxAttempts` attempts. A give-up always carries
/// the seconds to suggest (the upstream's Retry-After, or the backoff cap that would have
/// come next, rounded up), since `throttled` and `upstream_unavailable` always carry
/// `Retry-After` (behaviour §12).
public struct RetryPolicy: Sendable {
    /// Who is called.
    public enum Target: Sendable, Equatable {
        case sts
        case downstream(idempotent: Bool)
    }

    /// How an attempt ended.
    public enum Outcome: Sendable, Equatable {
        /// An HTTP answer; `nonRetryable` when the body says so (AADSTS90036).
        case response(status: Int, retryAfterSeconds: Int?, nonRetryable: Bool)
        /// Connection refused/reset; `requestSent` when any byte of the request went out.
        case networkError(requestSent: Bool)
        /// The attempt's timeout passed.
        case timedOut
    }

    /// What to do next.
    public enum Decision: Sendable, Equatable {
        /// Wait this many seconds, then try again.
        case retry(afterSeconds: Double)
        /// Stop; answer 429 `throttled` / 503 `upstream_unavailable` (or pass a downstream
        /// answer through) suggesting this Retry-After.
        case giveUp(retryAfterSeconds: Int?)
        /// The response is final (success or an error that retrying cannot fix).
        case accept
    }

    public let target: Target
    /// Attempts in all, first included (default 3).
    public let maxAttempts: Int
    /// Longest Retry-After waited for, seconds (default 60, `TOKENRELAY_MAX_RETRY_AFTER_S`).
    public let maxRetryAfter: Int
    /// First backoff cap, seconds (default 1).
    public let baseDelay: Double
    /// Largest backoff cap, seconds (default 30).
    public let maxDelay: Double

    public init(target: Target, maxAttempts: Int = 3, maxRetryAfter: Int = 60, baseDelay: Double = 1, maxDelay: Double = 30) {
        self.target = target
        self.maxAttempts = max(1, maxAttempts)
        self.maxRetryAfter = maxRetryAfter
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
    }

    /// The backoff cap after attempt `attempt` (1-based), seconds.
    public func backoffCap(afterAttempt attempt: Int) -> Double {
        let exponent = Double(max(0, min(attempt - 1, 30)))
        return min(maxDelay, baseDelay * pow(2, exponent))
    }

    /// Decides what follows an attempt.
    /// - Parameters:
    ///   - attempt: 1-based number of the attempt that just finished.
    ///   - outcome: how it ended.
    ///   - deadlineRemaining: seconds left in the request's budget.
    ///   - random: a value in [0, 1) for full jitter.
    /// - Returns: retry after a delay, give up with a suggested Retry-After, or accept.
    public func decide(attempt: Int, outcome: Outcome, deadlineRemaining: Double, random: Double) -> Decision {
        let nextCap = Int(backoffCap(afterAttempt: attempt).rounded(.up))
        let attemptsLeft = attempt < maxAttempts
        switch outcome {
        case .response(let status, let retryAfter, let nonRetryable):
            let retryable = status == 408 || status == 429 || status == 500 || status == 502 || status == 503 || status == 504
            guard retryable, !nonRetryable else { return .accept }
            if let retryAfter, status == 429 || status == 503 {
                guard attemptsLeft, retryAfter <= maxRetryAfter, Double(retryAfter) < deadlineRemaining else {
                    return .giveUp(retryAfterSeconds: retryAfter)
                }
                return .retry(afterSeconds: Double(retryAfter))
            }
            switch target {
            case .downstream(idempotent: false) where status != 429:
                return .giveUp(retryAfterSeconds: nextCap)
            case .sts where attempt >= 2:
                return .giveUp(retryAfterSeconds: nextCap)
            default:
                return backoff(attempt: attempt, attemptsLeft: attemptsLeft, deadlineRemaining: deadlineRemaining, random: random)
            }
        case .networkError(let requestSent):
            if case .downstream(idempotent: false) = target, requestSent { return .giveUp(retryAfterSeconds: nextCap) }
            if target == .sts, attempt >= 2 { return .giveUp(retryAfterSeconds: nextCap) }
            return backoff(attempt: attempt, attemptsLeft: attemptsLeft, deadlineRemaining: deadlineRemaining, random: random)
        case .timedOut:
            if case .downstream(idempotent: false) = target { return .giveUp(retryAfterSeconds: nextCap) }
            if target == .sts, attempt >= 2 { return .giveUp(retryAfterSeconds: nextCap) }
            return backoff(attempt: attempt, attemptsLeft: attemptsLeft, deadlineRemaining: deadlineRemaining, random: random)
        }
    }

    private func backoff(attempt: Int, attemptsLeft: Bool, deadlineRemaining: Double, random: Double) -> Decision {
        let cap = backoffCap(afterAttempt: attempt)
        let delay = min(max(random, 0), 1) * cap
        guard attemptsLeft, delay < deadlineRemaining else {
            return .giveUp(retryAfterSeconds: Int(cap.rounded(.up)))
        }
        return .retry(afterSeconds: delay)
    }
}
