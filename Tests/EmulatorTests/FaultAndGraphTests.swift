import Foundation
import HTTPCommon
import Testing

@testable import STSEmulator

@Suite("Emulator faults, Graph and stats")
struct FaultAndGraphTests {
    @Test func throttleFaultFiresCountTimesThenStops() async throws {
        // cases/10-sts-429-plain-text-body-retry-after
        let h = try EmulatorHarness()
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        let queued = await h.control("faults", ["endpoint": "token", "status": 429, "retry_after": "60", "count": 2])
        #expect(queued.status == 201)
        for _ in 0..<2 {
            let response = await h.refresh(a)
            #expect(response.status == 429)
            #expect(response.headers["Retry-After"] == "60")
            #expect(response.headers["Content-Type"] == nil)
            #expect(String(decoding: response.body, as: UTF8.self) == "Too Many Requests")
        }
        #expect(await h.refresh(a).status == 200)  // the refresh token was not consumed by the faults
    }

    @Test func httpDateRetryAfterAnd503Body() async throws {
        // cases/11-sts-503-temporarily-unavailable-90033
        let h = try EmulatorHarness()
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        _ = await h.control("faults", ["endpoint": "token", "status": 503, "retry_after": "Wed, 21 Oct 2026 07:28:00 GMT"])
        let response = await h.refresh(a)
        try expectEntraErrorShape(response, status: 503, error: "temporarily_unavailable", code: 90033, errorURI: false)
        #expect(response.headers["Retry-After"] == "Wed, 21 Oct 2026 07:28:00 GMT")
    }

    @Test func invalidGrantFaultWithSuberror() async throws {
        // cases/01-aadsts700082-refresh-token-inactive-bad-token
        let h = try EmulatorHarness()
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        _ = await h.control(
            "faults", ["endpoint": "token", "username": "alice@contoso.example", "error": "invalid_grant", "error_codes": [700082], "suberror": "bad_token"])
        let response = await h.refresh(a)
        try expectEntraErrorShape(response, status: 400, error: "invalid_grant", code: 700082, suberror: "bad_token")
        #expect(JSONValue.parse(response.body)?["error_description"]?.stringValue?.contains("expired due to inactivity") == true)
    }

    @Test func userFaultSkipsOtherUsers() async throws {
        let h = try EmulatorHarness()
        let alice = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        let bob = try #require(try await h.signIn("bob@contoso.example")["refresh_token"]?.stringValue)
        _ = await h.control("faults", ["endpoint": "token", "username": "BOB@contoso.example", "status": 500])
        #expect(await h.refresh(alice).status == 200)
        #expect(await h.refresh(bob).status == 500)
        #expect(await h.refresh(bob).status == 200)
    }

    @Test func mfaFaultFromKnownCode() async throws {
        // cases/02-aadsts50076-mfa-required-basic-action-keep-rt
        let h = try EmulatorHarness()
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        _ = await h.control("faults", ["endpoint": "token", "error_codes": [50076]])
        try expectEntraErrorShape(await h.refresh(a), status: 400, error: "invalid_grant", code: 50076, suberror: "basic_action")
    }

    @Test func statsCountTokenRequestsAndResetClearsThem() async throws {
        let h = try EmulatorHarness()
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        _ = await h.refresh(a)
        _ = await h.token([("grant_type", "client_credentials"), ("scope", "https://graph.microsoft.com/.default")])
        var stats = try #require(JSONValue.parse(await h.get("/_control/stats").body))
        #expect(stats["token_requests"] == 3)
        #expect(stats["token_requests_by_grant"] == ["authorization_code": 1, "client_credentials": 1, "refresh_token": 1])
        _ = await h.control("faults", ["endpoint": "graph", "status": 503])
        #expect(await h.control("reset", [:]).status == 200)
        stats = try #require(JSONValue.parse(await h.get("/_control/stats").body))
        #expect(stats["token_requests"] == 0)
        #expect(stats["pending_faults"] == 0)
    }

    @Test func graphMeWithAGoodTokenAndATamperedOne() async throws {
        let h = try EmulatorHarness()
        let token = try #require(try await h.signIn()["access_token"]?.stringValue)
        let ok = await h.get("/v1.0/me", headers: ["Authorization": "Bearer \(token)", "client-request-id": "cr-1"])
        #expect(ok.status == 200)
        #expect(ok.headers["client-request-id"] == "cr-1")
        #expect(ok.headers["request-id"] != nil)
        let me = try #require(JSONValue.parse(ok.body))
        #expect(me["id"] == "aaaaaaaa-0000-4000-8000-00000000a11c")
        #expect(me["displayName"] == "Alice Example" && me["userPrincipalName"] == "alice@contoso.example")
        #expect(me["givenName"] == "Alice" && me["surname"] == "Example" && me["mail"] == "alice@contoso.example")
        #expect(me["@odata.context"]?.stringValue?.hasSuffix("$metadata#users/$entity") == true)

        var parts = token.split(separator: ".").map(String.init)
        var claims = try TestJWT.parts(token).claims
        if case .object(var members) = claims, let i = members.firstIndex(where: { $0.0 == "oid" }) {
            members[i].1 = "bbbbbbbb-0000-4000-8000-000000000b0b"
            claims = .object(members)
        }
        parts[1] = Base64URLText.encode(claims.bytes)
        let tampered = await h.get("/v1.0/me", headers: ["Authorization": "Bearer \(parts.joined(separator: "."))"])
        #expect(tampered.status == 401)
        #expect(JSONValue.parse(tampered.body)?["error"]?["code"] == "InvalidAuthenticationToken")
        #expect(tampered.headers["WWW-Authenticate"]?.hasPrefix("Bearer realm=\"\", authorization_uri=") == true)
        #expect(await h.get("/v1.0/me").status == 401)
    }

    @Test func graphRejectsAnExpiredTokenWithoutSleeping() async throws {
        let h = try EmulatorHarness()
        _ = await h.control("users/alice@contoso.example", ["expires_in": 60])
        let token = try #require(try await h.signIn()["access_token"]?.stringValue)
        h.clock.advance(by: 61)
        let response = await h.get("/v1.0/me", headers: ["Authorization": "Bearer \(token)"])
        #expect(response.status == 401)
        #expect(JSONValue.parse(response.body)?["error"]?["message"] == "Lifetime validation failed, the token is expired.")
    }

    @Test func graphClaimsChallengeIsCase18Shape() async throws {
        // cases/18-graph-401-cae-claims-challenge-unquoted-params
        let h = try EmulatorHarness()
        let token = try #require(try await h.signIn()["access_token"]?.stringValue)
        let claims = #"{"access_token":{"nbf":{"essential":true, "value":"1657834417"}}}"#
        _ = await h.control("faults", ["endpoint": "graph", "claims_challenge": .string(claims)])
        let response = await h.get("/v1.0/me", headers: ["Authorization": "Bearer \(token)"])
        #expect(response.status == 401)
        let header = try #require(response.headers["WWW-Authenticate"])
        #expect(header.contains("authorization_uri=\(EmulatorHarness.base)/common/oauth2/authorize, client_id=\"00000003-0000-0000-c000-000000000000\""))
        #expect(header.contains("error=\"insufficient_claims\""))
        let encoded = try #require(header.firstMatch(of: /claims="([^"]+)"/)).1
        #expect(encoded == "eyJhY2Nlc3NfdG9rZW4iOnsibmJmIjp7ImVzc2VudGlhbCI6dHJ1ZSwgInZhbHVlIjoiMTY1NzgzNDQxNyJ9fX0=")
        #expect(JSONValue.parse(response.body)?["error"]?["innerError"]?["request-id"] != nil)
        #expect(await h.get("/v1.0/me", headers: ["Authorization": "Bearer \(token)"]).status == 200)
    }

    @Test func graphThrottleWithoutRetryAfterIsCase21Shape() async throws {
        // cases/21-graph-429-no-retry-after-exponential-backoff
        let h = try EmulatorHarness()
        let token = try #require(try await h.signIn()["access_token"]?.stringValue)
        _ = await h.control("faults", ["endpoint": "graph", "status": 429])
        let response = await h.get("/v1.0/me", headers: ["Authorization": "Bearer \(token)"])
        #expect(response.status == 429)
        #expect(response.headers["Retry-After"] == nil)
        #expect(JSONValue.parse(response.body)?["error"]?["code"] == "TooManyRequests")
    }

    @Test func capabilityClaimsBecomeXmsCc() async throws {
        let h = try EmulatorHarness()
        let (query, verifier) = try await h.authorize()
        let response = await h.token([
            ("grant_type", "authorization_code"), ("code", query["code"] ?? ""), ("redirect_uri", EmulatorHarness.redirectURI),
            ("code_verifier", verifier), ("claims", #"{"access_token":{"xms_cc":{"values":["cp1"]}}}"#),
        ])
        let token = try #require(JSONValue.parse(response.body)?["access_token"]?.stringValue)
        #expect(try TestJWT.parts(token).claims["xms_cc"] == ["cp1"])
    }

    @Test func latencyDelaysTheAnswer() async throws {
        let h = try EmulatorHarness()
        let a = try #require(try await h.signIn()["refresh_token"]?.stringValue)
        _ = await h.control("faults", ["endpoint": "token", "latency_ms": 150])
        let start = ContinuousClock.now
        #expect(await h.refresh(a).status == 200)
        #expect(ContinuousClock.now - start >= .milliseconds(140))
    }
}
