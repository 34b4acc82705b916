import Foundation
import HTTPCommon
import HTTPServerBridge
import Synchronization
import Testing
import TokenRelayTesting

/// behaviour §5 and §6 through the real binaries: Retry-After waits within the deadline, throttled
/// answers beyond it, the throttle memory, backoff for downstream APIs, methods other than GET,
/// proactive refresh falling back to the valid token, and the extended lifetime.
@Suite("Retries, throttling and resilience through the whole stack", .serialized, .timingGroup(.measuring))
struct RetryAndThrottleTests {
    static let alice = "alice@contoso.example"

    static func refresh(_ stack: TokenRelayStack, _ id: String, headers: [String: String] = [:]) async throws -> TestResponse {
        try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true], headers: headers)
    }

    static func httpDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }

    static func graphCount(_ stack: TokenRelayStack, _ method: String) async throws -> Int {
        let byMethod = try await stack.control("GET", "/_control/stats").json["graph_requests_by_method"] as? [String: Int]
        return byMethod?[method] ?? 0
    }

    @Test("10-sts-429-plain-text-body-retry-after: Retry-After: 2 (seconds) is waited for and the caller gets a token")
    func retryAfterSecondsRecovered() async throws {
        let stack = try await TokenRelayStack(name: "e2e_ra_seconds")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "status": 429, "retry_after": "2", "body": "Too Many Requests"])
        let before = try await stack.emulatorCount()
        let started = Date()
        let served = try await Self.refresh(stack, id)
        #expect(served.status == 200, "\(served.text)")
        #expect(served.json["source"] as? String == "refresh")
        #expect(Date().timeIntervalSince(started) >= 1.9, "the Retry-After was shortened")
        #expect(try await stack.emulatorCount() == before + 2)
    }

    @Test("A Retry-After given as an HTTP-date is honoured the same way")
    func retryAfterDateRecovered() async throws {
        let stack = try await TokenRelayStack(name: "e2e_ra_date")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control(
            "POST", "/_control/faults", json: ["endpoint": "token", "status": 429, "retry_after": Self.httpDate(Date().addingTimeInterval(2))])
        let before = try await stack.emulatorCount()
        let served = try await Self.refresh(stack, id)
        #expect(served.status == 200, "\(served.text)")
        #expect(try await stack.emulatorCount() == before + 2)
    }

    @Test("A Retry-After past a short Request-Timeout is 429 throttled with the remaining seconds, and the STS sees nothing before the time")
    func throttledBeyondDeadline() async throws {
        let stack = try await TokenRelayStack(name: "e2e_ra_deadline")
        defer { stack.stop() }
        // One account per form of Retry-After, so that the memory of the first does not answer the second.
        for (asDate, user) in [(false, Self.alice), (true, "bob@contoso.example")] {
            let id = try await stack.signInAccountId(user)
            let retryAfter = asDate ? Self.httpDate(Date().addingTimeInterval(21)) : "20"
            _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "status": 429, "retry_after": retryAfter])
            let started = Date()
            let refused = try await Self.refresh(stack, id, headers: ["Request-Timeout": "1.5"])
            #expect(refused.status == 429, "\(refused.text)")
            #expect(refused.json["error"] as? String == "throttled")
            let seconds = Int(refused.headers["Retry-After"] ?? "") ?? -1
            #expect((15...21).contains(seconds), "Retry-After \(seconds)")
            #expect(refused.json["retry_after_s"] as? Int == seconds)
            #expect(Date().timeIntervalSince(started) < 10, "waited for a Retry-After past the deadline")

            // Throttle memory: identical requests fail fast, with no STS call.
            let before = try await stack.emulatorCount()
            let again = try await Self.refresh(stack, id)
            #expect(again.status == 429)
            #expect(again.json["error"] as? String == "throttled")
            let remaining = again.json["retry_after_s"] as? Int ?? -1
            #expect(remaining >= 1 && remaining <= seconds)
            #expect(again.headers["Retry-After"] == String(remaining))
            #expect(try await stack.emulatorCount() == before, "the STS was called before the Retry-After time")

            // A still-valid cached token is served meanwhile (case 10).
            let cached = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
            #expect(cached.status == 200)
            #expect(cached.json["source"] as? String == "cache")

            // Other scopes of the same account are other requests.
            let other = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["Mail.Read"], "force_refresh": true])
            #expect(other.status == 200, "\(other.text)")
        }
    }

    /// A 429 `Retry-After: 60` on `id`'s forced refresh at `base`, then the identical request
    /// held back by the throttle memory with no STS call.
    static func throttleRemembered(_ stack: TokenRelayStack, _ id: String, on base: String = "") async throws {
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "status": 429, "retry_after": "60"])
        let refused = try await stack.request(
            "POST", base + "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true],
            headers: ["Request-Timeout": "1.5"])
        #expect(refused.status == 429, "\(refused.text)")
        #expect(refused.json["error"] as? String == "throttled")
        let before = try await stack.emulatorCount()
        let held = try await stack.request("POST", base + "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(held.status == 429, "\(held.text)")
        #expect(held.json["error"] as? String == "throttled")
        #expect(try await stack.emulatorCount() == before, "the throttle memory did not hold the identical request back")
    }

    @Test("behaviour §12: a new sign-in for the account clears its throttle memory; the next forced refresh reaches the STS")
    func signInClearsThrottleMemory() async throws {
        let stack = try await TokenRelayStack(name: "e2e_throttle_signin")
        defer { stack.stop() }
        let id = try await stack.signInAccountId(Self.alice)
        try await Self.throttleRemembered(stack, id)
        // A downstream call as the account, remembered too.
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "graph", "status": 429, "retry_after": "60"])
        let relayed = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id, "Request-Timeout": "5"])
        #expect(relayed.status == 429)
        let held = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id])
        #expect(held.json["error"] as? String == "throttled", "\(held.text)")

        #expect(try await stack.signInAccountId(Self.alice) == id)
        let before = try await stack.emulatorCount()
        let served = try await Self.refresh(stack, id)
        #expect(served.status == 200, "the throttle memory outlived the new sign-in: \(served.text)")
        #expect(served.json["source"] as? String == "refresh")
        #expect(try await stack.emulatorCount() > before, "no STS call after the new sign-in")
        let graphBefore = try await stack.emulatorCount("graph_requests")
        let called = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id])
        #expect(called.status == 200, "the downstream throttle memory outlived the new sign-in: \(called.text)")
        #expect(try await stack.emulatorCount("graph_requests") == graphBefore + 1)
    }

    @Test("behaviour §12: a sign-in on another replica clears this replica's throttle memory for the account within 2 s")
    func signInElsewhereClearsThrottleMemory() async throws {
        let stack = try await TokenRelayStack(name: "e2e_throttle_replica")
        defer { stack.stop() }
        let other = try await stack.startReplica()
        defer { other.stop() }
        let id = try await stack.signInAccountId(Self.alice)
        try await Self.throttleRemembered(stack, id)

        #expect(try await stack.signInAccountId(Self.alice, on: other.baseURL) == id)
        let started = Date()
        var served: TestResponse? = nil
        while Date().timeIntervalSince(started) < 2 {
            let answer = try await Self.refresh(stack, id)
            if answer.status == 200 {
                served = answer
                break
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(served?.json["source"] as? String == "refresh", "this replica still holds the account's throttle memory 2 s after a sign-in elsewhere")
    }

    @Test("A 503 without Retry-After and then a 200: retried after a backoff, the caller gets a token")
    func unavailableThenServed() async throws {
        let stack = try await TokenRelayStack(name: "e2e_503_200")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: ["endpoint": "token", "status": 503, "error": "temporarily_unavailable", "error_codes": [90033], "error_description": "Try again."])
        let before = try await stack.emulatorCount()
        let served = try await Self.refresh(stack, id)
        #expect(served.status == 200, "\(served.text)")
        #expect(try await stack.emulatorCount() == before + 2)
        let metrics = try await stack.request("GET", "/metrics", authenticated: false)
        #expect(metrics.text.contains("tokenrelay_retries_total{target=\"sts\"}"))
    }

    @Test("21-graph-429-no-retry-after-exponential-backoff: Graph is asked max_attempts times, and the relayed 429 carries a Retry-After")
    func graphBackoff() async throws {
        let stack = try await TokenRelayStack(name: "e2e_graph_429")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "graph", "status": 429, "count": 10])
        let before = try await stack.emulatorCount("graph_requests")
        let relayed = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id])
        #expect(relayed.status == 429, "\(relayed.text)")
        #expect(relayed.headers["TokenRelay-Relayed"] == "true")
        #expect((relayed.json["error"] as? [String: Any])?["code"] as? String == "TooManyRequests")
        let retryAfter = Int(relayed.headers["Retry-After"] ?? "") ?? 0
        #expect(retryAfter >= 1, "no Retry-After was added")
        #expect(try await stack.emulatorCount("graph_requests") == before + 3)
        _ = try await stack.control("DELETE", "/_control/faults")
    }

    @Test("A Graph 429 with Retry-After past the deadline is relayed, then the throttle memory answers throttled for that path only")
    func graphThrottleMemory() async throws {
        let stack = try await TokenRelayStack(name: "e2e_graph_memory")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "graph", "status": 429, "retry_after": "30"])
        let relayed = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id, "Request-Timeout": "5"])
        #expect(relayed.status == 429)
        #expect(relayed.headers["TokenRelay-Relayed"] == "true")
        #expect(relayed.headers["Retry-After"] == "30")
        let before = try await stack.emulatorCount("graph_requests")
        let held = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id])
        #expect(held.status == 429)
        #expect(held.headers["TokenRelay-Relayed"] == nil)
        #expect(held.json["error"] as? String == "throttled")
        let remaining = held.json["retry_after_s"] as? Int ?? -1
        #expect(remaining >= 1 && remaining <= 30)
        #expect(held.headers["Retry-After"] == String(remaining))
        #expect(try await stack.emulatorCount("graph_requests") == before)
        let otherPath = try await stack.request("GET", "/v1/downstream/graph/me/messages", headers: ["X-Account-Id": id])
        #expect(otherPath.status == 200, "\(otherPath.text)")
    }

    @Test("POST, PATCH, GET with query, DELETE are relayed with body and headers; a POST is not retried after a 500")
    func methods() async throws {
        let stack = try await TokenRelayStack(name: "e2e_methods")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let headers = ["X-Account-Id": id]

        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "graph", "status": 500, "count": 3])
        let posts = try await Self.graphCount(stack, "POST")
        let failed = try await stack.request("POST", "/v1/downstream/graph/me/messages", json: ["subject": "lost"], headers: headers)
        #expect(failed.status == 500, "\(failed.text)")
        #expect(failed.headers["TokenRelay-Relayed"] == "true")
        #expect(try await Self.graphCount(stack, "POST") == posts + 1, "a POST was sent again after a 500")
        _ = try await stack.control("DELETE", "/_control/faults")

        let created = try await stack.request("POST", "/v1/downstream/graph/me/messages", json: ["subject": "Hello"], headers: headers)
        #expect(created.status == 201, "\(created.text)")
        #expect(created.json["subject"] as? String == "Hello")
        #expect(created.headers["Location"] != nil)
        #expect(created.headers["ETag"] != nil)
        #expect(created.headers["Content-Type"]?.hasPrefix("application/json") == true)
        let messageId = try #require(created.json["id"] as? String)
        _ = try await stack.request("POST", "/v1/downstream/graph/me/messages", json: ["subject": "Second"], headers: headers)

        let patched = try await stack.request("PATCH", "/v1/downstream/graph/me/messages/\(messageId)", json: ["subject": "Changed"], headers: headers)
        #expect(patched.status == 200, "\(patched.text)")
        #expect(patched.json["subject"] as? String == "Changed")

        let top = try await stack.request("GET", "/v1/downstream/graph/me/messages?$top=1", headers: headers)
        #expect(top.status == 200)
        #expect((top.json["value"] as? [Any])?.count == 1)
        let head = try await stack.request("HEAD", "/v1/downstream/graph/me/messages/\(messageId)", headers: headers)
        #expect(head.status == 200)
        #expect(head.body.isEmpty)
        // The length a GET would have had (new-user attack: it was 0; RFC 9110 §8.6).
        let get = try await stack.request("GET", "/v1/downstream/graph/me/messages/\(messageId)", headers: headers)
        #expect(head.headers["Content-Length"] == String(get.body.count), "HEAD \(head.headers["Content-Length"] ?? "none"), GET \(get.body.count) bytes")

        let deleted = try await stack.request("DELETE", "/v1/downstream/graph/me/messages/\(messageId)", headers: headers)
        #expect(deleted.status == 204)
        #expect(try await stack.request("GET", "/v1/downstream/graph/me/messages/\(messageId)", headers: headers).status == 404)

        let put = try await stack.request("PUT", "/v1/downstream/graph/me", json: [:], headers: headers)
        #expect(put.headers["TokenRelay-Relayed"] == "true", "PUT was not relayed: \(put.status)")

        let tooLarge = try await stack.request(
            "POST", "/v1/downstream/graph/me/messages", json: ["subject": String(repeating: "x", count: 70_000)], headers: headers)
        #expect(tooLarge.status == 413)
    }

    @Test("A downstream answer larger than the relay carries is 502 upstream_error at once, not retried and called unreachable")
    func answerTooLarge() async throws {
        let api = LargeAnswerAPI(bytes: 9 << 20)
        let server = HTTPServer(configuration: HTTPServerConfiguration(host: "127.0.0.1", port: 0, threadCount: 1), handler: api)
        try server.start()
        defer { server.stop() }
        let stack = try await TokenRelayStack(
            name: "e2e_downstream_too_large",
            environment: [
                "TOKENRELAY_DOWNSTREAM_APIS":
                    #"{"files": {"base_url": "http://127.0.0.1:\#(server.port)/v1", "scopes": ["User.Read"], "app_scopes": ["https://graph.microsoft.com/.default"]}}"#
            ])
        defer { stack.stop() }
        let answer = try await stack.request("GET", "/v1/downstream/files/content", headers: ["X-App-Only": "true"])
        #expect(answer.status == 502, "\(answer.status) \(answer.text)")
        #expect(answer.json["error"] as? String == "upstream_error")
        #expect(answer.headers["Retry-After"] == nil, "retrying cannot help")
        #expect(api.requests == 1, "the same large answer was fetched \(api.requests) times")
    }

    @Test("A failed background refresh keeps the still-valid token served")
    func proactiveRefreshFailure() async throws {
        let stack = try await TokenRelayStack(name: "e2e_proactive")
        defer { stack.stop() }
        _ = try await stack.control("POST", "/_control/users/\(Self.alice)", json: ["refresh_in": 0])
        let id = try await stack.signInAccountId()
        let first = try await Self.refresh(stack, id)
        #expect(first.status == 200)
        let token = first.json["access_token"] as? String
        _ = try await stack.control(
            "POST", "/_control/faults", json: ["endpoint": "token", "status": 500, "error": "server_error", "error_description": "down", "count": 20])
        let before = try await stack.emulatorCount()
        let served = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
        #expect(served.status == 200)
        #expect(served.json["source"] as? String == "cache")
        #expect(served.json["access_token"] as? String == token)
        // The background refresh runs and fails.
        var attempted = false
        for _ in 0..<50 where !attempted {
            attempted = try await stack.emulatorCount() > before
            if !attempted { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(attempted, "no background refresh was started")
        let again = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
        #expect(again.status == 200, "\(again.text)")
        #expect(again.json["access_token"] as? String == token)
        #expect(try await stack.request("GET", "/v1/accounts/\(id)").json["state"] as? String == "active")
        _ = try await stack.control("DELETE", "/_control/faults")
    }

    @Test("11-sts-503-temporarily-unavailable-90033: with the setting, an expired token before ext_expires_on is served, flagged, while the STS is down")
    func extendedLifetime() async throws {
        for allowed in [true, false] {
            let stack = try await TokenRelayStack(name: "e2e_extended_\(allowed)", environment: ["TOKENRELAY_ALLOW_EXTENDED_LIFETIME": String(allowed)])
            defer { stack.stop() }
            // expires_in ≤ expiry skew: expired on arrival, no waiting (behaviour §12 Time in tests).
            _ = try await stack.control("POST", "/_control/users/\(Self.alice)", json: ["expires_in": 120, "ext_expires_in": 7200])
            let id = try await stack.signInAccountId()
            _ = try await stack.control(
                "POST", "/_control/faults",
                json: [
                    "endpoint": "token", "status": 503, "error": "temporarily_unavailable", "error_codes": [90033], "count": 20,
                    "error_description": "A transient error has occurred.",
                ])
            let answer = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
            if allowed {
                #expect(answer.status == 200, "\(answer.text)")
                #expect(answer.json["extended_lifetime"] as? Bool == true)
                #expect(answer.json["source"] as? String == "cache")
                let expiresOn = answer.json["expires_on"] as? Int ?? 0
                let extExpiresOn = answer.json["ext_expires_on"] as? Int ?? 0
                #expect(extExpiresOn > expiresOn)
                // When the STS is back, the normal path answers again, unflagged.
                _ = try await stack.control("DELETE", "/_control/faults")
                _ = try await stack.control("POST", "/_control/users/\(Self.alice)", json: ["expires_in": 3600])
                let normal = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
                #expect(normal.status == 200)
                #expect(normal.json["source"] as? String == "refresh")
                #expect(normal.json["extended_lifetime"] == nil)
            } else {
                #expect(answer.status == 503, "\(answer.text)")
                #expect(answer.json["error"] as? String == "upstream_unavailable")
                #expect(answer.headers["Retry-After"] != nil)
            }
        }
    }
}

/// A downstream API whose every answer is a body of `bytes` bytes; counts the requests.
final class LargeAnswerAPI: HTTPHandler {
    let bytes: Int
    private let count = Mutex(0)

    init(bytes: Int) { self.bytes = bytes }

    var requests: Int { count.withLock { $0 } }

    func respondImmediately(to request: HTTPRequest) -> HTTPFirstStep<HTTPRequest> {
        count.withLock { $0 += 1 }
        return .respond(HTTPResponse(status: 200, headers: ["Content-Type": "application/octet-stream"], body: [UInt8](repeating: 0x78, count: bytes)))
    }

    func respond(to request: HTTPRequest) async -> HTTPResponse { HTTPResponse(status: 500) }
}
