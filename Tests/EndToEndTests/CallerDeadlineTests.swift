import Foundation
import Testing
import TokenRelayTesting

/// Deadlines are the caller's (behaviour §5 Deadlines, §12; issue 10 item 4): with `Request-Timeout`
/// shorter than the STS's or the API's answer, the caller gets `upstream_unavailable` (503/504) with
/// `Retry-After` and `retry_after_s` at its deadline, never when the upstream finally answers; a
/// redemption already sent runs on in the background and its rotated refresh token is stored
/// (the emulator's rotation grace is 0, so a lost rotation would show).
@Suite("Deadlines are the caller's, against an STS and an API that take 20 s", .serialized, .timingGroup(.measuring))
struct CallerDeadlineTests {
    static let alice = "alice@contoso.example"
    static let slowMilliseconds = 20_000

    static func stack(_ name: String) async throws -> TokenRelayStack {
        try await TokenRelayStack(name: name, emulatorArguments: ["--rotation-grace-seconds", "0"])
    }

    /// `body` and how long it took (seconds).
    static func timed(_ body: () async throws -> TestResponse) async throws -> (TestResponse, Double) {
        let started = Date()
        let response = try await body()
        return (response, Date().timeIntervalSince(started))
    }

    /// The latest a test accepts an answer to a request whose deadline is `deadline` seconds, as
    /// seen from the test process: the deadline plus 3 s, because the test process shares two
    /// cores with the relay, the emulator and PostgreSQL. The upstream takes 20 s, so any answer
    /// within this came from the deadline, not from the upstream.
    static func bound(_ deadline: Double) -> Double { deadline + 3 }

    /// The deadline answer: `upstream_unavailable` with `Retry-After` and `retry_after_s`, 503
    /// (the upstream failed or timed out) or 504 (the deadline passed while the STS or a lease
    /// holder was still working: docs/behaviour.md §5.2; behaviour §4 allows both).
    static func expectDeadlineAnswer(_ response: TestResponse, elapsed: Double, within seconds: Double, _ label: String) {
        #expect(elapsed < seconds, "\(label): answered after \(elapsed) s")
        #expect([503, 504].contains(response.status), "\(label): \(response.status) \(response.text)")
        #expect(response.json["error"] as? String == "upstream_unavailable", "\(label): \(response.text)")
        #expect(Int(response.headers["Retry-After"] ?? "") ?? 0 >= 1, "\(label): Retry-After \(response.headers["Retry-After"] ?? "none")")
        #expect((response.json["retry_after_s"] as? Int ?? 0) >= 1, "\(label): \(response.text)")
    }

    /// No refresh token of alice's chain was refused as superseded (no rotation was lost).
    static func expectNoLostRotation(_ stack: TokenRelayStack) async throws {
        let stats = try await stack.control("GET", "/_control/stats")
        let chain = ((stats.json["refresh_token_chain"] as? [String: Any])?[Self.alice] as? [String: Any]) ?? [:]
        #expect(chain["rejected_superseded"] as? Int == 0, "\(stats.text)")
    }

    /// Waits until the emulator has answered every token request it holds (the slow one ended).
    static func waitForSlowRedemption(_ stack: TokenRelayStack) async throws {
        try await Task.sleep(for: .milliseconds(Self.slowMilliseconds))
        try await Task.sleep(for: .seconds(1))
    }

    @Test("Silent: Request-Timeout 2 against a 20 s STS is upstream_unavailable with Retry-After within 3 s; the redemption's rotated refresh token is stored")
    func silentAgainstSlowSTS() async throws {
        let stack = try await Self.stack("e2e_deadline_silent")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "latency_ms": Self.slowMilliseconds])
        let body: [String: Any] = ["account_id": id, "scopes": ["User.Read"], "force_refresh": true]
        let (short, elapsed) = try await Self.timed { try await stack.request("POST", "/v1/tokens/silent", json: body, headers: ["Request-Timeout": "2"]) }
        Self.expectDeadlineAnswer(short, elapsed: elapsed, within: Self.bound(2), "silent")
        try await Self.waitForSlowRedemption(stack)
        for _ in 0..<2 {
            let next = try await stack.request("POST", "/v1/tokens/silent", json: body)
            #expect(next.status == 200, "\(next.text)")
        }
        try await Self.expectNoLostRotation(stack)
    }

    @Test("Import: the first redemption of an imported refresh token against a 20 s STS keeps the caller's 2 s deadline; its rotation is stored")
    func importAgainstSlowSTS() async throws {
        let stack = try await Self.stack("e2e_deadline_import")
        defer { stack.stop() }
        let adal = try await stack.adalRefreshToken(for: Self.alice)
        let imported = try await stack.request(
            "POST", "/v1/accounts/import", json: ["username": Self.alice, "refresh_token": adal, "authority": "\(stack.emulator.baseURL)/\(stack.tenantId)"])
        #expect(imported.status == 201, "\(imported.text)")
        let id = try #require(imported.json["account_id"] as? String)
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "latency_ms": Self.slowMilliseconds])
        let body: [String: Any] = ["account_id": id, "scopes": ["User.Read"]]
        let (short, elapsed) = try await Self.timed { try await stack.request("POST", "/v1/tokens/silent", json: body, headers: ["Request-Timeout": "2"]) }
        Self.expectDeadlineAnswer(short, elapsed: elapsed, within: Self.bound(2), "import")
        try await Self.waitForSlowRedemption(stack)
        let next = try await stack.request("POST", "/v1/tokens/silent", json: body)
        #expect(next.status == 200, "\(next.text)")
        try await Self.expectNoLostRotation(stack)
    }

    @Test("Downstream: Request-Timeout 2 against a 20 s STS, then a 20 s API, is upstream_unavailable with Retry-After within 3 s each; the next call works")
    func downstreamAgainstSlowSTSAndAPI() async throws {
        let stack = try await Self.stack("e2e_deadline_downstream")
        defer { stack.stop() }
        // Tokens expire on arrival (expires_in below the 300 s skew): every call redeems.
        _ = try await stack.control("POST", "/_control/users/\(Self.alice)", json: ["expires_in": 60])
        let id = try await stack.signInAccountId()
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "latency_ms": Self.slowMilliseconds])
        let headers = ["X-Account-Id": id, "Request-Timeout": "2"]
        let (slowSTS, stsElapsed) = try await Self.timed { try await stack.request("GET", "/v1/downstream/graph/me", headers: headers) }
        Self.expectDeadlineAnswer(slowSTS, elapsed: stsElapsed, within: Self.bound(2), "downstream, slow STS")
        #expect(slowSTS.headers["TokenRelay-Relayed"] == nil)
        try await Self.waitForSlowRedemption(stack)

        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "graph", "latency_ms": Self.slowMilliseconds])
        let (slowAPI, apiElapsed) = try await Self.timed { try await stack.request("GET", "/v1/downstream/graph/me", headers: headers) }
        Self.expectDeadlineAnswer(slowAPI, elapsed: apiElapsed, within: Self.bound(2), "downstream, slow API")
        #expect(slowAPI.headers["TokenRelay-Relayed"] == nil)

        let next = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id])
        #expect(next.status == 200, "\(next.text)")
        try await Self.expectNoLostRotation(stack)
    }

    @Test("Two coalesced waiters with 1 s and 3 s deadlines on one 20 s refresh are each answered at their own deadline")
    func coalescedWaitersKeepTheirOwnDeadlines() async throws {
        let stack = try await Self.stack("e2e_deadline_waiters")
        defer { stack.stop() }
        _ = try await stack.control("POST", "/_control/users/\(Self.alice)", json: ["expires_in": 60])
        let id = try await stack.signInAccountId()
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "latency_ms": Self.slowMilliseconds])
        let before = try await stack.emulatorCount()
        async let short = Self.timed {
            try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]], headers: ["Request-Timeout": "1"])
        }
        try await Task.sleep(for: .milliseconds(200))
        async let long = Self.timed {
            try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]], headers: ["Request-Timeout": "3"])
        }
        let (shortAnswer, shortElapsed) = try await short
        let (longAnswer, longElapsed) = try await long
        Self.expectDeadlineAnswer(shortAnswer, elapsed: shortElapsed, within: 1.6, "1 s waiter")
        Self.expectDeadlineAnswer(longAnswer, elapsed: longElapsed, within: Self.bound(3), "3 s waiter")
        #expect(longElapsed > 2.5, "the 3 s waiter waited for its own deadline, not the first one's: \(longElapsed) s")
        #expect(try await stack.emulatorCount() == before + 1, "one redemption for both waiters")
        try await Self.waitForSlowRedemption(stack)
        let next = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
        #expect(next.status == 200, "\(next.text)")
        try await Self.expectNoLostRotation(stack)
    }
}
