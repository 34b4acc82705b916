import Foundation
import HTTPClientBridge
import IdentityCore
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore
import TokenRelayUpstream

/// The throttle layer on its own: a real loopback peer, virtual time.
@Suite("Throttle layer around the retry loop (behaviour §5)")
struct ThrottledHTTPClientTests {
    let http = HTTPClient()
    let metrics = Metrics()
    let memory = ThrottleMemory()

    func client(_ time: VirtualClock) -> ThrottledHTTPClient {
        ThrottledHTTPClient(
            retrying: RetryingHTTPClient(http: http, metrics: metrics, logger: Logger(level: .error, logPII: false, sink: .memory()), clock: time.clock),
            memory: memory)
    }

    /// One GET through the layer, classified as the downstream service does.
    func send(
        _ peer: ScriptedPeer, _ time: VirtualClock, key: ThrottleMemory.Key = "k", deadline: Double = 10, maxAttempts: Int = 3
    ) async -> Result<RetryingHTTPClient.Final, ThrottledHTTPClient.Failure> {
        let context = RequestContext(
            correlationId: UUID().uuidString, deadline: time.clock.now().addingTimeInterval(deadline), caller: nil, access: .unrestricted)
        do {
            return .success(
                try await client(time).send(
                    HTTPClientRequest(method: "GET", url: peer.baseURL + "/r"), throttleKey: key,
                    policy: RetryPolicy(target: .downstream(idempotent: true), maxAttempts: maxAttempts), target: "downstream", context: context
                ) { attempt in
                    switch attempt {
                    case .success(let response):
                        .response(
                            status: response.status, retryAfterSeconds: RetryAfter.seconds(response.headers["Retry-After"], now: time.clock.now()),
                            nonRetryable: false)
                    case .failure(let error): .init(error)
                    }
                })
        } catch {
            return .failure(error)
        }
    }

    static func heldBack(_ result: Result<RetryingHTTPClient.Final, ThrottledHTTPClient.Failure>) -> ThrottledHTTPClient.HeldBack? {
        guard case .failure(.heldBack(let held)) = result else { return nil }
        return held
    }

    @Test("A 429 whose Retry-After is not waited for is handed back, then the same key is held back until that time, other keys are not")
    func remembersAndHoldsBack() async throws {
        let peer = try ScriptedPeer([ScriptedPeer.answer(429, [("Retry-After", "30")])], fallback: ScriptedPeer.answer(200))
        let time = VirtualClock()
        let first = await send(peer, time)
        guard case .success(let final) = first else {
            Issue.record("the first request was not sent: \(first)")
            return
        }
        #expect(final.decision == .giveUp(retryAfterSeconds: 30))
        #expect(peer.requests == 1)

        time.advance(10)
        #expect(Self.heldBack(await send(peer, time)) == .init(status: 429, remainingSeconds: 20))
        #expect(throws: ThrottledHTTPClient.HeldBack(status: 429, remainingSeconds: 20)) { try client(time).admit("k", target: "downstream") }
        #expect(peer.requests == 1, "a held-back request reached the upstream")
        #expect(metrics.value("tokenrelay_throttled_total", ["target": "downstream", "reason": "memory"]) == 2)

        guard case .success = await send(peer, time, key: "other") else {
            Issue.record("another key was held back")
            return
        }
        #expect(peer.requests == 2)

        time.advance(20)
        guard case .success(let later) = await send(peer, time) else {
            Issue.record("still held back after the Retry-After time")
            return
        }
        #expect(later.decision == .accept)
        #expect(peer.requests == 3)
    }

    @Test("A 503 with Retry-After is remembered with its status; a 429 without Retry-After, a 500 with one, and a wait that succeeded are not")
    func whatIsRemembered() async throws {
        let time = VirtualClock()
        let unavailable = try ScriptedPeer([ScriptedPeer.answer(503, [("Retry-After", "90")])])
        _ = await send(unavailable, time, key: "503")
        #expect(Self.heldBack(await send(unavailable, time, key: "503"))?.status == 503)

        let noRetryAfter = try ScriptedPeer([], fallback: ScriptedPeer.answer(429))
        _ = await send(noRetryAfter, time, key: "429-bare")
        let serverError = try ScriptedPeer([], fallback: ScriptedPeer.answer(500, [("Retry-After", "90")]))
        _ = await send(serverError, time, key: "500")
        let waited = try ScriptedPeer([ScriptedPeer.answer(429, [("Retry-After", "2")])], fallback: ScriptedPeer.answer(200))
        _ = await send(waited, time, key: "waited")
        #expect(time.sleeps.contains(2), "the 2-second Retry-After was not waited for")
        for key: ThrottleMemory.Key in ["429-bare", "500", "waited"] {
            #expect(throws: Never.self, "\(key.text) was remembered") { try client(time).admit(key, target: "downstream") }
        }
        #expect(memory.count == 1)
    }

    @Test("A deadline already spent is the retry loop's problem, and nothing is remembered")
    func deadline() async throws {
        let peer = try ScriptedPeer([])
        let time = VirtualClock()
        guard case .failure(.problem(let problem)) = await send(peer, time, deadline: 0.01) else {
            Issue.record("no deadline problem")
            return
        }
        #expect(problem.status == 504)
        #expect(peer.requests == 0)
        #expect(memory.count == 0)
    }
}
