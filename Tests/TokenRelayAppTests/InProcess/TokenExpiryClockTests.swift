import Foundation
import Testing
import TokenRelayBase
import TokenRelayTesting

/// Token expiry read on the service's one clock (issue 27 item 6): a test moves TokenRelay's
/// ``TestClock`` across `expires_on − expiry skew` instead of sleeping an hour (behaviour §12:
/// served iff `expires_on − now ≥ max(expiry_skew, min_ttl_s)`).
@Suite("Token expiry on the service's clock", .serialized)
struct TokenExpiryClockTests {
    @Test("A token is served from cache up to expires_on − expiry skew on the service's clock, then refreshed; no sleep")
    func expiryOnTestClock() async throws {
        let time = TestClock(unixTime: Date().timeIntervalSince1970.rounded(.down))
        let stack = try await InProcessApp(name: "expiry_clock", clock: time.clock)
        defer { stack.stop() }
        let accountId = try await stack.signInAccountId()
        let body: [String: Any] = ["account_id": accountId, "scopes": ["User.Read"]]

        let first = try await stack.request("POST", "/v1/tokens/silent", json: body)
        #expect(first.status == 200)
        let token = try #require(first.json["access_token"] as? String)
        let expiresOn = try #require(first.json["expires_on"] as? Int)
        let skew = stack.dependencies.configuration.tokens.expirySkewSeconds
        let redemptions = try await stack.emulatorCount()

        // One second before the token falls within the skew: still the same token from cache.
        time.advance(by: Double(expiresOn - skew - time.clock.seconds - 1))
        let before = try await stack.request("POST", "/v1/tokens/silent", json: body)
        // Compared as a Bool: a failure must not print a token.
        let kept = before.json["access_token"] as? String == token
        #expect(kept, "status \(before.status): another token was served")
        #expect(before.json["source"] as? String == "cache")

        // Two seconds later it is within the skew: a new token, redeemed with the refresh token,
        // expiring at least the skew after the clock's now.
        time.advance(by: 2)
        let after = try await stack.request("POST", "/v1/tokens/silent", json: body)
        #expect(after.status == 200)
        let renewed = after.json["access_token"] as? String != token
        #expect(renewed, "the cached token was served within the expiry skew")
        let newExpiresOn = try #require(after.json["expires_on"] as? Int)
        #expect(newExpiresOn - time.clock.seconds >= skew)
        #expect(try await stack.emulatorCount() > redemptions)
    }
}

/// Health answers read the service's one clock too (issue 27 item 6): uptime and check times.
@Suite("Health on the service's clock", .serialized)
struct HealthClockTests {
    @Test("/healthz's uptime and /readyz's check time follow the service's clock, not the machine's")
    func healthOnTestClock() async throws {
        let time = TestClock(unixTime: 1_767_225_600)  // 2026-01-01T00:00:00Z
        let stack = try await InProcessApp(name: "health_clock", clock: time.clock)
        defer { stack.stop() }
        time.advance(by: 3600)
        let live = try await stack.request("GET", "/healthz")
        let uptime = try #require((live.json["checks"] as? [String: Any])?["uptime"] as? [[String: Any]])
        #expect(uptime.first?["observedValue"] as? Double == 3600)
        #expect(uptime.first?["time"] as? String == "2026-01-01T01:00:00Z")
        let ready = try await stack.request("GET", "/readyz")
        let database = try #require((ready.json["checks"] as? [String: Any])?["postgresql:responseTime"] as? [[String: Any]])
        #expect(database.first?["time"] as? String == "2026-01-01T01:00:00Z")
    }
}
