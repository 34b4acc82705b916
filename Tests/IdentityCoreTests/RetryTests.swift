import Foundation
import Testing

@testable import IdentityCore

@Suite("Retry-After (RFC 9110 §10.2.3)")
struct RetryAfterTests {
    let now = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT

    @Test("delta-seconds")
    func delta() {
        #expect(RetryAfter.seconds("60", now: now) == 60)
        #expect(RetryAfter.seconds(" 0 ", now: now) == 0)
        #expect(RetryAfter.seconds("99999999999999999999999", now: now) == Int.max)
    }

    @Test("HTTP-date in the three RFC forms, rounded up, past dates give 0")
    func dates() {
        #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:50:37 GMT", now: now) == 60)
        #expect(RetryAfter.seconds("Sunday, 06-Nov-94 08:50:37 GMT", now: now) == 60)
        #expect(RetryAfter.seconds("Sun Nov  6 08:50:37 1994", now: now) == 60)
        #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:50:37 GMT", now: now.addingTimeInterval(0.2)) == 60)
        #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:40:00 GMT", now: now) == 0)
    }

    @Test("absent or invalid is nil", arguments: [nil, "", "-5", "1.5", "soon", "Sun, 99 Nov 1994 08:50:37 GMT"] as [String?])
    func invalid(value: String?) {
        #expect(RetryAfter.seconds(value, now: now) == nil)
    }
}

@Suite("Retry policy (behaviour §5)")
struct RetryPolicyTests {
    let sts = RetryPolicy(target: .sts)
    let idempotent = RetryPolicy(target: .downstream(idempotent: true))
    let post = RetryPolicy(target: .downstream(idempotent: false))

    func response(_ status: Int, _ retryAfter: Int? = nil, nonRetryable: Bool = false) -> RetryPolicy.Outcome {
        .response(status: status, retryAfterSeconds: retryAfter, nonRetryable: nonRetryable)
    }

    @Test("success and client errors are accepted", arguments: [200, 201, 204, 302, 400, 401, 403, 404, 409, 501])
    func accept(status: Int) {
        #expect(idempotent.decide(attempt: 1, outcome: response(status), deadlineRemaining: 30, random: 0.5) == .accept)
        #expect(sts.decide(attempt: 1, outcome: response(status), deadlineRemaining: 30, random: 0.5) == .accept)
    }

    @Test("429/503 honour Retry-After exactly, never shortened")
    func honourRetryAfter() {
        #expect(idempotent.decide(attempt: 1, outcome: response(429, 5), deadlineRemaining: 30, random: 0) == .retry(afterSeconds: 5))
        #expect(idempotent.decide(attempt: 1, outcome: response(503, 2), deadlineRemaining: 30, random: 0.9) == .retry(afterSeconds: 2))
        #expect(post.decide(attempt: 1, outcome: response(503, 2), deadlineRemaining: 30, random: 0.9) == .retry(afterSeconds: 2))
        #expect(sts.decide(attempt: 1, outcome: response(503, 2), deadlineRemaining: 30, random: 0.9) == .retry(afterSeconds: 2))
    }

    @Test("a Retry-After beyond the cap or the deadline is not waited for")
    func retryAfterTooLong() {
        #expect(idempotent.decide(attempt: 1, outcome: response(429, 61), deadlineRemaining: 120, random: 0) == .giveUp(retryAfterSeconds: 61))
        #expect(idempotent.decide(attempt: 1, outcome: response(503, 20), deadlineRemaining: 20, random: 0) == .giveUp(retryAfterSeconds: 20))
        #expect(idempotent.decide(attempt: 3, outcome: response(429, 1), deadlineRemaining: 30, random: 0) == .giveUp(retryAfterSeconds: 1))
    }

    @Test("other 5xx back off exponentially with full jitter, capped")
    func backoff() {
        let policy = RetryPolicy(target: .downstream(idempotent: true), maxAttempts: 10, baseDelay: 1, maxDelay: 8)
        #expect(policy.decide(attempt: 1, outcome: response(500), deadlineRemaining: 100, random: 0.5) == .retry(afterSeconds: 0.5))
        #expect(policy.decide(attempt: 2, outcome: response(502), deadlineRemaining: 100, random: 0.5) == .retry(afterSeconds: 1))
        #expect(policy.decide(attempt: 3, outcome: response(504), deadlineRemaining: 100, random: 0.5) == .retry(afterSeconds: 2))
        #expect(policy.decide(attempt: 4, outcome: response(503), deadlineRemaining: 100, random: 0.5) == .retry(afterSeconds: 4))
        #expect(policy.decide(attempt: 6, outcome: response(500), deadlineRemaining: 100, random: 0.5) == .retry(afterSeconds: 4))
        #expect(policy.decide(attempt: 1, outcome: response(408), deadlineRemaining: 100, random: 0) == .retry(afterSeconds: 0))
        #expect(policy.backoffCap(afterAttempt: 9) == 8)
    }

    @Test("at most maxAttempts; give-up carries the next backoff rounded up")
    func maxAttempts() {
        #expect(idempotent.decide(attempt: 3, outcome: response(500), deadlineRemaining: 30, random: 0.1) == .giveUp(retryAfterSeconds: 4))
        #expect(idempotent.decide(attempt: 3, outcome: response(429), deadlineRemaining: 30, random: 0.1) == .giveUp(retryAfterSeconds: 4))
        let halfSecond = RetryPolicy(target: .downstream(idempotent: true), maxAttempts: 1, baseDelay: 0.5)
        #expect(halfSecond.decide(attempt: 1, outcome: response(503), deadlineRemaining: 30, random: 0.1) == .giveUp(retryAfterSeconds: 1))
    }

    @Test("a backoff that would end after the deadline gives up")
    func deadline() {
        #expect(idempotent.decide(attempt: 2, outcome: response(500), deadlineRemaining: 0.5, random: 0.9) == .giveUp(retryAfterSeconds: 2))
    }

    @Test("STS: 5xx without Retry-After and network errors are retried once only")
    func stsOnce() {
        #expect(sts.decide(attempt: 1, outcome: response(500), deadlineRemaining: 30, random: 0.3) == .retry(afterSeconds: 0.3))
        #expect(sts.decide(attempt: 2, outcome: response(500), deadlineRemaining: 30, random: 0.3) == .giveUp(retryAfterSeconds: 2))
        #expect(sts.decide(attempt: 1, outcome: .networkError(requestSent: true), deadlineRemaining: 30, random: 0.3) == .retry(afterSeconds: 0.3))
        #expect(sts.decide(attempt: 2, outcome: .networkError(requestSent: false), deadlineRemaining: 30, random: 0.3) == .giveUp(retryAfterSeconds: 2))
        #expect(sts.decide(attempt: 1, outcome: .timedOut, deadlineRemaining: 30, random: 0.3) == .retry(afterSeconds: 0.3))
        #expect(sts.decide(attempt: 2, outcome: .timedOut, deadlineRemaining: 30, random: 0.3) == .giveUp(retryAfterSeconds: 2))
    }

    @Test("STS: a non-retryable body is never retried")
    func stsNonRetryable() {
        #expect(sts.decide(attempt: 1, outcome: response(500, nonRetryable: true), deadlineRemaining: 30, random: 0.3) == .accept)
    }

    @Test("non-idempotent downstream: only 429, 503 with Retry-After, or nothing sent")
    func nonIdempotent() {
        #expect(post.decide(attempt: 1, outcome: response(500), deadlineRemaining: 30, random: 0.3) == .giveUp(retryAfterSeconds: 1))
        #expect(post.decide(attempt: 1, outcome: response(503), deadlineRemaining: 30, random: 0.3) == .giveUp(retryAfterSeconds: 1))
        #expect(post.decide(attempt: 1, outcome: response(429), deadlineRemaining: 30, random: 0.3) == .retry(afterSeconds: 0.3))
        #expect(post.decide(attempt: 1, outcome: response(429, 4), deadlineRemaining: 30, random: 0.3) == .retry(afterSeconds: 4))
        #expect(post.decide(attempt: 1, outcome: .networkError(requestSent: true), deadlineRemaining: 30, random: 0.3) == .giveUp(retryAfterSeconds: 1))
        #expect(post.decide(attempt: 1, outcome: .networkError(requestSent: false), deadlineRemaining: 30, random: 0.3) == .retry(afterSeconds: 0.3))
        #expect(post.decide(attempt: 1, outcome: .timedOut, deadlineRemaining: 30, random: 0.3) == .giveUp(retryAfterSeconds: 1))
        #expect(idempotent.decide(attempt: 1, outcome: .timedOut, deadlineRemaining: 30, random: 0.3) == .retry(afterSeconds: 0.3))
    }

    @Test("STS: a 429/503 with Retry-After is waited for up to max_attempts, not once only")
    func stsRetryAfterUpToMaxAttempts() {
        #expect(sts.decide(attempt: 2, outcome: response(503, 1), deadlineRemaining: 30, random: 0) == .retry(afterSeconds: 1))
        #expect(sts.decide(attempt: 2, outcome: response(429, 1), deadlineRemaining: 30, random: 0) == .retry(afterSeconds: 1))
        #expect(sts.decide(attempt: 3, outcome: response(503, 1), deadlineRemaining: 30, random: 0) == .giveUp(retryAfterSeconds: 1))
    }

    @Test("Retry-After at the cap is waited for; one second more is not; the deadline must leave room after it")
    func retryAfterBounds() {
        let capped = RetryPolicy(target: .downstream(idempotent: true), maxRetryAfter: 10)
        #expect(capped.decide(attempt: 1, outcome: response(429, 10), deadlineRemaining: 30, random: 0) == .retry(afterSeconds: 10))
        #expect(capped.decide(attempt: 1, outcome: response(429, 11), deadlineRemaining: 30, random: 0) == .giveUp(retryAfterSeconds: 11))
        #expect(capped.decide(attempt: 1, outcome: response(503, 5), deadlineRemaining: 5.5, random: 0) == .retry(afterSeconds: 5))
        #expect(capped.decide(attempt: 1, outcome: response(503, 5), deadlineRemaining: 5, random: 0) == .giveUp(retryAfterSeconds: 5))
    }

    @Test("21-graph-429-no-retry-after-exponential-backoff: waits grow 1, 2, 4 s caps and stop at max_attempts with the next cap")
    func case21Sequence() {
        let five = RetryPolicy(target: .downstream(idempotent: true), maxAttempts: 4)
        #expect(five.decide(attempt: 1, outcome: response(429), deadlineRemaining: 60, random: 0.999) == .retry(afterSeconds: 0.999))
        #expect(five.decide(attempt: 2, outcome: response(429), deadlineRemaining: 60, random: 0.999) == .retry(afterSeconds: 1.998))
        #expect(five.decide(attempt: 3, outcome: response(429), deadlineRemaining: 60, random: 0.999) == .retry(afterSeconds: 3.996))
        #expect(five.decide(attempt: 4, outcome: response(429), deadlineRemaining: 60, random: 0.999) == .giveUp(retryAfterSeconds: 8))
    }
}
