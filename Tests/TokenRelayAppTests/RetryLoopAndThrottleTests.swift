import Foundation
import HTTPClientBridge
import HTTPCommon
import HTTPServerBridge
import IdentityCore
import Synchronization
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

/// A loopback HTTP peer that answers scripted responses in order (then a default) and counts
/// what it receives: the real HTTP client and server, no mocked transport.
final class ScriptedPeer: Sendable {
    final class Script: HTTPHandler, Sendable {
        let queue: Mutex<[HTTPResponse]>
        let fallback: HTTPResponse
        let received = Mutex(0)

        init(_ queue: [HTTPResponse], fallback: HTTPResponse) {
            self.queue = Mutex(queue)
            self.fallback = fallback
        }

        func respondImmediately(to request: HTTPRequest) -> HTTPFirstStep<HTTPRequest> {
            .respond(next())
        }

        private func next() -> HTTPResponse {
            received.withLock { $0 += 1 }
            return queue.withLock { $0.isEmpty ? fallback : $0.removeFirst() }
        }

        func respond(to request: HTTPRequest) async -> HTTPResponse { next() }
    }

    let script: Script
    let server: HTTPServer

    init(_ responses: [HTTPResponse], fallback: HTTPResponse = ScriptedPeer.tokens) throws {
        script = Script(responses, fallback: fallback)
        server = HTTPServer(configuration: HTTPServerConfiguration(host: "127.0.0.1", port: 0, threadCount: 1), handler: script)
        try server.start()
    }

    deinit { server.stop() }

    var requests: Int { script.received.withLock { $0 } }
    var baseURL: String { "http://127.0.0.1:\(server.port)" }

    static func answer(_ status: Int, _ headers: [(String, String)] = [], _ body: String = "") -> HTTPResponse {
        HTTPResponse(status: status, headers: HTTPHeaders(headers), body: Array(body.utf8))
    }

    static let tokens = answer(
        200, [("Content-Type", "application/json")], #"{"token_type":"Bearer","access_token":"at","expires_in":3600,"scope":"User.Read"}"#)
}

/// Virtual time for the retry loop: `sleep` records the wait and moves the clock on at once.
final class VirtualClock: Sendable {
    private let state = Mutex<(offset: Double, sleeps: [Double])>((0, []))
    /// Virtual time starts here and moves only by `advance` and the loop's sleeps, so a slow
    /// (loaded) machine cannot shift what the code under test sees.
    let start = Date()
    let random: Double

    init(random: Double = 0.5) { self.random = random }

    var sleeps: [Double] { state.withLock { $0.sleeps } }
    func advance(_ seconds: Double) { state.withLock { $0.offset += seconds } }

    var clock: UpstreamClock {
        UpstreamClock(
            now: { self.start.addingTimeInterval(self.state.withLock { $0.offset }) },
            sleep: { seconds in
                self.state.withLock {
                    $0.offset += seconds
                    $0.sleeps.append(seconds)
                }
            },
            random: { self.random })
    }
}

@Suite("Retry loop and throttle memory (behaviour §5)")
struct RetryLoopAndThrottleTests {
    let http = HTTPClient()
    let metrics = Metrics()

    func client(_ time: VirtualClock) -> RetryingHTTPClient {
        RetryingHTTPClient(http: http, metrics: metrics, logger: Logger(level: .error, logPII: false, sink: .memory()), clock: time.clock)
    }

    func context(deadline seconds: Double, _ time: VirtualClock) -> RequestContext {
        RequestContext(correlationId: UUID().uuidString, deadline: time.clock.now().addingTimeInterval(seconds), caller: nil, access: .unrestricted)
    }

    /// Sends one GET to `peer` under a downstream policy, classifying as DownstreamService does.
    func downstream(
        _ peer: ScriptedPeer, _ time: VirtualClock, idempotent: Bool = true, deadline: Double = 30, maxAttempts: Int = 3
    ) async throws -> RetryingHTTPClient.Final {
        let policy = RetryPolicy(target: .downstream(idempotent: idempotent), maxAttempts: maxAttempts)
        return try await client(time).send(
            HTTPClientRequest(method: idempotent ? "GET" : "POST", url: peer.baseURL + "/v1.0/me"), policy: policy, target: "downstream",
            context: context(deadline: deadline, time)
        ) { attempt in
            switch attempt {
            case .success(let response):
                .response(
                    status: response.status, retryAfterSeconds: RetryAfter.seconds(response.headers["Retry-After"], now: time.clock.now()), nonRetryable: false)
            case .failure(let error): .init(error)
            }
        }
    }

    @Test("A correlation id is taken for a GUID (sent to the STS as client-request-id) exactly when UUID(uuidString:) reads it, a plain GUID on its bytes")
    func correlationIdIsGUID() {
        var samples = [
            UUID().uuidString, UUID().uuidString.lowercased(), "0ad1b1c2-0000-4000-8000-00000000000A", "", "not-a-guid",
            "{0ad1b1c2-0000-4000-8000-000000000001}", "0ad1b1c2000040008000000000000001", "0ad1b1c2-0000-4000-8000-00000000000g",
            "0ad1b1c2-0000-4000-8000-0000000000012", "0ad1b1c2-0000-4000-8000-00000000000", "0ad1b1c2_0000-4000-8000-000000000001",
            "0ad1b1c2-0000-4000-8000-00000000000\u{0}", "0ad1b1c2-0000-4000-8000-0000000000é", " 0ad1b1c2-0000-4000-8000-00000000001",
        ]
        // Every position of a GUID changed to each kind of character.
        let guid = Array("0ad1b1c2-0000-4000-8000-000000000001")
        for index in guid.indices {
            for replacement: Character in ["-", "F", "f", "G", "0", " ", "é"] {
                var changed = guid
                changed[index] = replacement
                samples.append(String(changed))
            }
        }
        for sample in samples {
            #expect(RequestContext.isGUID(sample) == (UUID(uuidString: sample) != nil), "\(sample.debugDescription)")
        }
    }

    @Test("A 429 with Retry-After: 2 is waited for exactly (never shortened), then the answer is accepted")
    func retryAfterDelta() async throws {
        let peer = try ScriptedPeer([ScriptedPeer.answer(429, [("retry-after", "2")])], fallback: ScriptedPeer.answer(200))
        let time = VirtualClock()
        let final = try await downstream(peer, time)
        #expect(final.decision == .accept)
        #expect((try? final.last.get())?.status == 200)
        #expect(time.sleeps == [2])
        #expect(peer.requests == 2)
    }

    @Test("A Retry-After given as an HTTP-date is rounded up and waited for")
    func retryAfterDate() async throws {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let time = VirtualClock()
        let date = formatter.string(from: time.clock.now().addingTimeInterval(30))
        let peer = try ScriptedPeer([ScriptedPeer.answer(503, [("Retry-After", date)])], fallback: ScriptedPeer.answer(200))
        let final = try await downstream(peer, time, deadline: 60)
        #expect(final.decision == .accept)
        #expect(time.sleeps.count == 1)
        #expect((28...30).contains(time.sleeps.first ?? 0), "\(time.sleeps)")
    }

    @Test("A Retry-After that ends after the deadline is not waited for: give up with it at once")
    func retryAfterBeyondDeadline() async throws {
        let peer = try ScriptedPeer([ScriptedPeer.answer(429, [("Retry-After", "5")])], fallback: ScriptedPeer.answer(200))
        let time = VirtualClock()
        let final = try await downstream(peer, time, deadline: 3)
        #expect(final.decision == .giveUp(retryAfterSeconds: 5))
        #expect(time.sleeps.isEmpty)
        #expect(peer.requests == 1)
    }

    @Test("21-graph-429-no-retry-after-exponential-backoff: full-jitter backoff, at most max_attempts, then the next backoff to suggest")
    func backoffWithoutRetryAfter() async throws {
        let busy = ScriptedPeer.answer(429, [("Content-Type", "application/json")], #"{"error":{"code":"TooManyRequests"}}"#)
        let peer = try ScriptedPeer([], fallback: busy)
        let time = VirtualClock(random: 0.5)
        let final = try await downstream(peer, time)
        #expect(final.decision == .giveUp(retryAfterSeconds: 4))
        #expect(time.sleeps == [0.5, 1.0])
        #expect(peer.requests == 3)
        #expect(metrics.value("tokenrelay_retries_total", ["target": "downstream"]) == 2)
    }

    @Test("A POST that got a 500 is not sent again")
    func postNotRetried() async throws {
        let peer = try ScriptedPeer([ScriptedPeer.answer(500)], fallback: ScriptedPeer.answer(201))
        let time = VirtualClock()
        let final = try await downstream(peer, time, idempotent: false)
        #expect(final.decision == .giveUp(retryAfterSeconds: 1))
        #expect(peer.requests == 1)
        #expect(time.sleeps.isEmpty)
    }

    @Test("A deadline already spent makes no request: 504 upstream_unavailable")
    func deadlineSpent() async throws {
        let peer = try ScriptedPeer([])
        let time = VirtualClock()
        await #expect(throws: RelayError.self) { _ = try await downstream(peer, time, deadline: 0.01) }
        #expect(peer.requests == 0)
    }

    @Test("Transport failures as the policy sees them: a timeout with nothing sent may be retried for a POST")
    func transportOutcomes() {
        let post = RetryPolicy(target: .downstream(idempotent: false))
        let connecting = RetryPolicy.Outcome(HTTPClientError(kind: .timedOut, requestSent: false, function: "curl_multi_perform", reason: "connect"))
        let waiting = RetryPolicy.Outcome(HTTPClientError(kind: .timedOut, requestSent: true, function: "curl_multi_perform", reason: "read"))
        #expect(connecting == .networkError(requestSent: false))
        #expect(waiting == .timedOut)
        #expect(post.decide(attempt: 1, outcome: connecting, deadlineRemaining: 30, random: 0.5) == .retry(afterSeconds: 0.5))
        #expect(post.decide(attempt: 1, outcome: waiting, deadlineRemaining: 30, random: 0.5) == .giveUp(retryAfterSeconds: 1))
    }

    @Test("A POST whose connection is refused (nothing sent) is tried again")
    func postRetriedWhenNothingSent() async throws {
        let time = VirtualClock()
        // A port nobody listens on: bind one, note it, close it.
        let closed = try ScriptedPeer([])
        let url = closed.baseURL
        closed.server.stop()
        let policy = RetryPolicy(target: .downstream(idempotent: false), maxAttempts: 2)
        let final = try await client(time).send(
            HTTPClientRequest(method: "POST", url: url + "/x", body: Array("{}".utf8)), policy: policy, target: "downstream",
            context: context(deadline: 30, time)
        ) { attempt in
            switch attempt {
            case .success(let response): .response(status: response.status, retryAfterSeconds: nil, nonRetryable: false)
            case .failure(let error): .init(error)
            }
        }
        #expect(time.sleeps == [0.5], "a refused POST was not retried")
        #expect(final.decision == .giveUp(retryAfterSeconds: 2))
    }

    // MARK: STS

    func sts(_ time: VirtualClock) -> STSClient {
        STSClient(
            http: client(time), clientId: "client", credential: ClientCredential(clientId: "client", kind: .secret("secret")), maxAttempts: 3,
            maxRetryAfterSeconds: 60, metrics: metrics)
    }

    func authority(_ peer: ScriptedPeer) -> Authority {
        Authority(scheme: "http", host: "127.0.0.1", port: peer.server.port, tenant: "tenant", policy: nil, type: .aad)
    }

    func redeem(_ client: STSClient, _ peer: ScriptedPeer, _ time: VirtualClock, account: String = "acc-1") async -> Result<TokenResponse, STSCallError> {
        do {
            return .success(
                try await client.redeem(
                    grant: [("grant_type", "refresh_token"), ("refresh_token", "rt")], authority: authority(peer),
                    scopes: try ScopeRules.requested(scopes: ["User.Read"], resource: nil), claims: nil, context: context(deadline: 30, time),
                    account: account))
        } catch let error as STSCallError {
            return .failure(error)
        } catch {
            return .failure(.unavailable(RelayError(.internal, "scopes")))
        }
    }

    static func throttledSeconds(_ result: Result<TokenResponse, STSCallError>) -> Int? {
        guard case .failure(.rejected(let failure)) = result, failure.problem == .throttled, failure.status == 429 else { return nil }
        return failure.retryAfterSeconds
    }

    @Test("10-sts-429-plain-text-body-retry-after: the STS sees nothing more for that client, authority, scopes and account until the time")
    func stsThrottleMemory() async throws {
        let peer = try ScriptedPeer([ScriptedPeer.answer(429, [("Retry-After", "60")], "Too Many Requests")])
        let time = VirtualClock()
        let client = sts(time)
        #expect(Self.throttledSeconds(await redeem(client, peer, time)) == 60)
        #expect(peer.requests == 1)

        time.advance(20)
        #expect(Self.throttledSeconds(await redeem(client, peer, time)) == 40)
        #expect(peer.requests == 1, "a throttled request reached the STS")
        #expect(metrics.value("tokenrelay_throttled_total", ["target": "sts", "reason": "memory"]) == 1)

        // Another account is not held back.
        guard case .success = await redeem(client, peer, time, account: "acc-2") else {
            Issue.record("another account was held back")
            return
        }
        #expect(peer.requests == 2)

        time.advance(41)
        guard case .success = await redeem(client, peer, time) else {
            Issue.record("still held back after the Retry-After time")
            return
        }
        #expect(peer.requests == 3)
    }

    @Test("11-sts-503-temporarily-unavailable-90033: a 5xx without Retry-After is retried once, then 503 with Retry-After")
    func stsRetriedOnce() async throws {
        let unavailable = ScriptedPeer.answer(
            503, [("Content-Type", "application/json")], #"{"error":"temporarily_unavailable","error_codes":[90033],"error_description":"AADSTS90033: x"}"#)
        let peer = try ScriptedPeer([unavailable, unavailable, unavailable])
        let time = VirtualClock()
        let result = await redeem(sts(time), peer, time)
        guard case .failure(.unavailable(let problem)) = result else {
            Issue.record("expected upstream_unavailable, got \(result)")
            return
        }
        #expect(problem.status == 503)
        #expect(problem.headers["Retry-After"] != nil)
        #expect(peer.requests == 2)
        #expect(time.sleeps == [0.5])
    }

    @Test("A 5xx whose body says non-retryable (AADSTS90036) is not retried")
    func stsNonRetryable() async throws {
        let fatal = ScriptedPeer.answer(
            500, [("Content-Type", "application/json")],
            #"{"error":"server_error","error_codes":[90036],"error_description":"AADSTS90036: Non-retryable error"}"#)
        let peer = try ScriptedPeer([fatal, fatal])
        let time = VirtualClock()
        _ = await redeem(sts(time), peer, time)
        #expect(peer.requests == 1)
        #expect(time.sleeps.isEmpty)
    }

    // MARK: ThrottleMemory

    @Test("Throttle memory: remaining seconds rounded up, never shortened, forgotten after the time")
    func memory() {
        let memory = ThrottleMemory()
        let now = Date(timeIntervalSince1970: 1_000_000)
        memory.remember("k", seconds: 10, status: 429, now: now)
        #expect(memory.recall("k", now: now.addingTimeInterval(0.5))?.remainingSeconds == 10)
        memory.remember("k", seconds: 2, status: 503, now: now)
        #expect(memory.recall("k", now: now)?.entry.status == 429, "a shorter wait replaced a longer one")
        #expect(memory.recall("other", now: now) == nil)
        #expect(memory.recall("k", now: now.addingTimeInterval(10)) == nil)
        #expect(memory.count == 0)
        memory.remember("zero", seconds: 0, status: 429, now: now)
        #expect(memory.count == 0)
    }

    @Test("Throttle memory is bounded: ended entries go first, then the soonest to end")
    func bounded() {
        let memory = ThrottleMemory(capacity: 3)
        let now = Date(timeIntervalSince1970: 1_000_000)
        memory.remember("short", seconds: 1, status: 429, now: now)
        memory.remember("a", seconds: 50, status: 429, now: now)
        memory.remember("b", seconds: 60, status: 429, now: now)
        memory.remember("c", seconds: 70, status: 429, now: now.addingTimeInterval(2))  // "short" has ended
        #expect(memory.count == 3)
        #expect(memory.recall("a", now: now.addingTimeInterval(2)) != nil)
        memory.remember("d", seconds: 80, status: 429, now: now.addingTimeInterval(2))  // none ended: "a" ends soonest
        #expect(memory.count == 3)
        #expect(memory.recall("a", now: now.addingTimeInterval(2)) == nil)
        #expect(memory.recall("d", now: now.addingTimeInterval(2)) != nil)
    }

    @Test("Throttle memory: forget(accountId:) drops the account's STS and downstream entries; other accounts, the app and OBO stay")
    func forgetAccount() {
        let memory = ThrottleMemory()
        let now = Date(timeIntervalSince1970: 1_000_000)
        let token = "https://login.microsoftonline.com/t/oauth2/v2.0/token"
        let alice = ThrottleMemory.stsKey(clientId: "c", authority: token, scopes: "user.read", account: "alice-id")
        let aliceMail = ThrottleMemory.stsKey(clientId: "c", authority: token, scopes: "mail.read", account: "alice-id")
        let aliceGraph = ThrottleMemory.downstreamKey(
            api: "graph", identity: DownstreamIdentity.account("alice-id").throttleIdentity, path: "me",
            accountId: DownstreamIdentity.account("alice-id").accountId)
        let bob = ThrottleMemory.stsKey(clientId: "c", authority: token, scopes: "user.read", account: "bob-id")
        // A grant digest or an identity that happens to read like the account id is not the account.
        let app = ThrottleMemory.stsKey(clientId: "c", authority: token, scopes: "user.read", grantDigest: "alice-id")
        let appGraph = ThrottleMemory.downstreamKey(api: "graph", identity: DownstreamIdentity.app.throttleIdentity, path: "me", accountId: nil)
        let obo = ThrottleMemory.downstreamKey(
            api: "graph", identity: DownstreamIdentity.onBehalfOf(assertion: "a.b.c").throttleIdentity, path: "me",
            accountId: DownstreamIdentity.onBehalfOf(assertion: "a.b.c").accountId)
        let all = [alice, aliceMail, aliceGraph, bob, app, appGraph, obo]
        for key in all { memory.remember(key, seconds: 60, status: 429, now: now) }
        #expect(memory.count == all.count)
        #expect(app != alice)

        memory.forget(accountId: "alice-id")
        for key in [alice, aliceMail, aliceGraph] { #expect(memory.recall(key, now: now) == nil, "\(key.text) outlived the account") }
        for key in [bob, app, appGraph, obo] { #expect(memory.recall(key, now: now) != nil, "\(key.text) was forgotten with another account") }
        #expect(memory.count == 4)
        memory.forget(accountId: "nobody")
        #expect(memory.count == 4)
    }

    @Test("STS keys: same client, authority, scopes and account; claims play no part")
    func keys() {
        let one = ThrottleMemory.stsKey(clientId: "C", authority: "https://login.microsoftonline.com/T/oauth2/v2.0/token", scopes: "user.read", account: "a")
        #expect(
            one == ThrottleMemory.stsKey(clientId: "c", authority: "https://login.microsoftonline.com/t/oauth2/v2.0/token", scopes: "User.Read", account: "a"))
        #expect(
            one != ThrottleMemory.stsKey(clientId: "c", authority: "https://login.microsoftonline.com/t/oauth2/v2.0/token", scopes: "user.read", account: "b"))
        #expect(STSClient.grantDigest([("grant_type", "client_credentials")]) == STSClient.grantDigest([("grant_type", "client_credentials")]))
        #expect(!STSClient.grantDigest([("assertion", "secret-assertion")]).contains("secret"))
    }
}
