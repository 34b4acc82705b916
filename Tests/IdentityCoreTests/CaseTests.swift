import Foundation
import Testing

@testable import IdentityCore

/// One test per /work/shared/cases response: feeds the exact status, headers and body to
/// the parser or mapper and checks the case's expected behaviour.
@Suite("Real response shapes (shared/cases)")
struct CaseTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    func classify(_ c: CaseResponse) -> STSFailure {
        STSErrorMapping.classify(status: c.status, headers: c.headers, body: c.bodyBytes, now: now)
    }

    @Test("01-aadsts700082-refresh-token-inactive-bad-token: refresh token dead, interaction_required")
    func case01() {
        let failure = classify(Cases.c01)
        #expect(failure.disposition == .refreshTokenDead)
        #expect(failure.refreshTokenIsDead)
        #expect(!failure.isRetryable)
        #expect(failure.problem == .interactionRequired)
        #expect(failure.status == 409)
        #expect(failure.suberror == "bad_token")
        #expect(failure.stsErrorCodes == [700082])
        #expect(failure.traceId == "1a1a1a1a-0000-4000-8000-000000000001")
        #expect(failure.correlationId == "2b2b2b2b-0000-4000-8000-000000000001")
        #expect(failure.retryAfterSeconds == nil)
        #expect(failure.detail == "AADSTS700082: The refresh token has expired due to inactivity.")
    }

    @Test("01-aadsts700082-refresh-token-inactive-bad-token: older body without suberror is still dead")
    func case01WithoutSuberror() {
        let body = Cases.c01.body.replacingOccurrences(of: #""suberror": "bad_token""#, with: #""x": 1"#)
        let failure = STSErrorMapping.classify(status: 400, headers: [], body: Array(body.utf8), now: now)
        #expect(failure.disposition == .refreshTokenDead)
        #expect(failure.suberror == nil)
        #expect(failure.stsErrorCodes == [700082])
    }

    @Test("02-aadsts50076-mfa-required-basic-action-keep-rt: interaction_required, refresh token kept")
    func case02() {
        let failure = classify(Cases.c02)
        #expect(failure.disposition == .interactionRequired)
        #expect(!failure.refreshTokenIsDead)
        #expect(!failure.isRetryable)
        #expect(failure.problem == .interactionRequired)
        #expect(failure.status == 409)
        #expect(failure.suberror == "basic_action")
        #expect(failure.stsErrorCodes == [50076])
        #expect(failure.detail.hasPrefix("AADSTS50076: Due to a configuration change"))
        #expect(!failure.detail.contains("Trace ID"))
    }

    @Test("05-aadsts50173-grant-revoked-password-change: dead without a suberror")
    func case05() {
        let failure = classify(Cases.c05)
        #expect(failure.disposition == .refreshTokenDead)
        #expect(failure.problem == .interactionRequired)
        #expect(failure.suberror == nil)
        #expect(failure.stsErrorCodes == [50173])
        #expect(failure.traceId == "1a1a1a1a-0000-4000-8000-000000000005")
        #expect(!failure.isRetryable)
        // CRLF separators: the detail stops at the first line.
        #expect(!failure.detail.contains("\r"))
        #expect(failure.detail.hasPrefix("AADSTS50173: The provided grant has expired due to it being revoked"))
    }

    @Test("06-aadsts65001-consent-required: consent is its own outcome, refresh token kept, scopes to consent")
    func case06() throws {
        let failure = classify(Cases.c06)
        #expect(failure.disposition == .interactionRequired)
        #expect(!failure.refreshTokenIsDead)
        #expect(failure.suberror == "consent_required")
        #expect(failure.stsErrorCodes == [65001])
        #expect(failure.problem == .interactionRequired)
        // The scopes the problem lists for consent are the canonical requested scopes.
        let requested = try ScopeRules.requested(
            scopes: ["https://graph.microsoft.com/Mail.Read", "https://graph.microsoft.com/Calendars.ReadWrite", "offline_access"],
            resource: nil)
        #expect(requested.canonical == ["Calendars.ReadWrite", "Mail.Read"])
    }

    @Test("08-aadb2c90080-b2c-expired-grant: B2C body without error_codes is a dead refresh token")
    func case08() throws {
        let parsed = STSErrorResponse.parse(Cases.c08.bodyBytes)
        #expect(parsed.error == "invalid_grant")
        #expect(parsed.codes == [.aadb2c(90080)])
        #expect(parsed.errorCodes == [90080])
        #expect(parsed.suberror == nil)
        #expect(parsed.traceId == nil)
        #expect(parsed.correlationId == "2b2b2b2b-0000-4000-8000-000000000008")

        let failure = classify(Cases.c08)
        #expect(failure.disposition == .refreshTokenDead)
        #expect(failure.problem == .interactionRequired)
        #expect(failure.stsErrorCodes == [90080])
        #expect(!failure.isRetryable)
        #expect(failure.detail.hasPrefix("AADB2C90080: The provided grant has expired."))

        // The request context's authority and scopes.
        let validator = try AuthorityValidator(knownAuthorities: ["contoso.b2clogin.com"], allowHTTPLoopback: false)
        let authority = try validator.validate("https://contoso.b2clogin.com/contoso.onmicrosoft.com/B2C_1_signupsignin")
        #expect(authority.type == .b2c)
        #expect(authority.policy == "B2C_1_signupsignin")
        let scopes = ScopeSet(normalizing: ["https://contoso.onmicrosoft.com/api/read offline_access openid"])
        #expect(scopes.canonical == ["https://contoso.onmicrosoft.com/api/read"])
    }

    @Test("09-aadsts7000215-invalid-client-secret-401: credential rejected, 502, no account touched")
    func case09() {
        let failure = classify(Cases.c09)
        #expect(failure.disposition == .clientCredentialRejected)
        #expect(!failure.refreshTokenIsDead)
        #expect(!failure.isRetryable)
        #expect(failure.problem == .upstreamError)
        #expect(failure.status == 502)
        #expect(failure.stsErrorCodes == [7000215])
        #expect(failure.error == "invalid_client")
        #expect(failure.detail.hasPrefix("AADSTS7000215: Invalid client secret provided."))
    }

    @Test("09-aadsts7000215-invalid-client-secret-401: AADSTS7000222 (expired secret) is handled the same way")
    func case09ExpiredSecret() {
        let body = Cases.c09.body.replacingOccurrences(of: "7000215", with: "7000222")
        let failure = STSErrorMapping.classify(status: 401, headers: Cases.c09.headers, body: Array(body.utf8), now: now)
        #expect(failure.disposition == .clientCredentialRejected)
        #expect(failure.stsErrorCodes == [7000222])
        #expect(failure.status == 502)
    }

    @Test("10-sts-429-plain-text-body-retry-after: plain-text 429 is throttled with Retry-After 60")
    func case10() {
        let parsed = STSErrorResponse.parse(Cases.c10.bodyBytes)
        #expect(parsed.error == nil)
        #expect(parsed.errorCodes.isEmpty)

        let failure = classify(Cases.c10)
        #expect(failure.disposition == .throttled)
        #expect(failure.problem == .throttled)
        #expect(failure.status == 429)
        #expect(failure.retryAfterSeconds == 60)
        #expect(!failure.refreshTokenIsDead)
        #expect(failure.isRetryable)
        #expect(!failure.detail.contains("Too Many Requests"))

        // 60 s exceeds the 30 s request budget: no waiting, give up with the full 60 s.
        let policy = RetryPolicy(target: .sts)
        let decision = policy.decide(
            attempt: 1, outcome: .response(status: 429, retryAfterSeconds: failure.retryAfterSeconds, nonRetryable: false),
            deadlineRemaining: 30, random: 0.5)
        #expect(decision == .giveUp(retryAfterSeconds: 60))
    }

    @Test("11-sts-503-temporarily-unavailable-90033: transient, retried once, then 503 with Retry-After")
    func case11() {
        let failure = classify(Cases.c11)
        #expect(failure.disposition == .transient)
        #expect(failure.problem == .upstreamUnavailable)
        #expect(failure.status == 503)
        #expect(failure.stsErrorCodes == [90033])
        #expect(failure.isRetryable)
        #expect(!failure.refreshTokenIsDead)
        #expect(failure.retryAfterSeconds == nil)

        let policy = RetryPolicy(target: .sts)
        let outcome = RetryPolicy.Outcome.response(status: 503, retryAfterSeconds: nil, nonRetryable: false)
        let first = policy.decide(attempt: 1, outcome: outcome, deadlineRemaining: 30, random: 0.9)
        #expect(first == .retry(afterSeconds: 0.9))
        let second = policy.decide(attempt: 2, outcome: outcome, deadlineRemaining: 29, random: 0.9)
        guard case .giveUp(let retryAfter?) = second else {
            Issue.record("expected giveUp with Retry-After, got \(second)")
            return
        }
        #expect(retryAfter >= 1)
    }

    @Test("11-sts-503-temporarily-unavailable-90033: a 500 AADSTS90036 non-retryable is never retried")
    func case11NonRetryable() {
        let body =
            #"{"error":"server_error","error_description":"AADSTS90036: An unexpected, non-retryable error stemming from the directory service has occurred.","error_codes":[90036]}"#
        let failure = STSErrorMapping.classify(status: 500, headers: [], body: Array(body.utf8), now: now)
        #expect(failure.disposition == .nonRetryableServer)
        #expect(failure.status == 502)
        #expect(!failure.isRetryable)
        let decision = RetryPolicy(target: .sts).decide(
            attempt: 1, outcome: .response(status: 500, retryAfterSeconds: nil, nonRetryable: true), deadlineRemaining: 30, random: 0)
        #expect(decision == .accept)
    }

    @Test("13-refresh-token-rotation-success: rotated token, lifetimes, client_info, foci tolerated")
    func case13() throws {
        #expect(Cases.c13.status == 200)
        let response = try TokenResponse.parse(Cases.c13.bodyBytes)
        #expect(response.refreshToken == "1.AXkA<opaque-refresh-token-B>")
        #expect(response.expiresIn == 4213)
        #expect(response.extExpiresIn == 4213)
        #expect(response.refreshIn == 2106)
        #expect(response.tokenType == "Bearer")
        #expect(response.foci == "1")
        #expect(response.idToken != nil)
        let info = try ClientInfo.decode(try #require(response.clientInfo))
        #expect(info.homeAccountId == "66666666-7777-8888-9999-000000000000.aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")

        let requested = ScopeSet(normalizing: [
            "https://graph.microsoft.com/User.Read", "https://graph.microsoft.com/Mail.Read", "offline_access", "openid", "profile",
        ])
        let granted = ScopeRules.granted(response.scope, requested: requested)
        #expect(granted.canonical == ["Mail.Read", "User.Read"])
        #expect(ScopeRules.declined(requested: requested, granted: granted).isEmpty)
        #expect(granted.isSuperset(of: requested))

        // expires_in is the lifetime; refresh_in only schedules the proactive refresh.
        let issuedAt = 1_000_000
        let times = CachedTokenTimes(
            expiresOn: issuedAt + response.expiresIn, extExpiresOn: response.extExpiresIn.map { issuedAt + $0 },
            refreshOn: response.refreshIn.map { issuedAt + $0 })
        #expect(TokenFreshness.evaluate(times, now: issuedAt, expirySkew: 300, minTTL: 0) == .fresh)
        #expect(TokenFreshness.evaluate(times, now: issuedAt + 2106, expirySkew: 300, minTTL: 0) == .refreshDue)
        #expect(TokenFreshness.evaluate(times, now: issuedAt + 4213, expirySkew: 300, minTTL: 0) == .expired)
    }

    @Test("14-token-response-without-refresh-token: refresh token is nil, never empty")
    func case14() throws {
        let response = try TokenResponse.parse(Cases.c14.bodyBytes)
        #expect(response.refreshToken == nil)
        #expect(response.expiresIn == 3599)
        #expect(response.extExpiresIn == 3599)
        #expect(response.refreshIn == nil)
        #expect(response.idToken == nil)
        #expect(response.clientInfo == nil)
        let requested = try ScopeRules.requested(
            scopes: [
                "https://graph.microsoft.com/Mail.ReadWrite", "https://graph.microsoft.com/Mail.Send.All",
                "https://graph.microsoft.com/User.Read",
            ], resource: nil)
        let granted = ScopeRules.granted(response.scope, requested: requested)
        #expect(granted.canonical == ["Mail.ReadWrite", "Mail.Send.All", "User.Read"])
        #expect(ScopeRules.declined(requested: requested, granted: granted).isEmpty)
        // offline_access is always added to what goes to the STS.
        #expect(requested.wireValue.hasSuffix("openid profile offline_access"))
    }

    @Test("16-declined-scopes-narrower-grant: declined User.ReadBasic.All, granted Files.ReadWrite")
    func case16() throws {
        let response = try TokenResponse.parse(Cases.c16.bodyBytes)
        let requested = try ScopeRules.requested(
            scopes: [
                "https://graph.microsoft.com/User.ReadBasic.All", "https://graph.microsoft.com/Files.ReadWrite", "offline_access",
                "openid", "profile",
            ], resource: nil)
        let granted = ScopeRules.granted(response.scope, requested: requested)
        #expect(granted.canonical == ["Files.ReadWrite"])
        #expect(ScopeRules.declined(requested: requested, granted: granted) == ["User.ReadBasic.All"])
        #expect(!granted.isSuperset(of: requested))
        #expect(response.refreshToken == "1.AXkA<opaque-refresh-token-B>")
    }

    @Test("19-graph-401-cae-outdated-policies-stuck-cached-token: the challenge's claims (nbf and xms_caeerror) decoded, merged with cp1, bypassing the cache")
    func case19() throws {
        let header = try #require(Cases.c19.header("www-authenticate"))
        let challenge = try #require(AuthenticationChallenge.parse(header).first)
        #expect(challenge.scheme == "Bearer")
        #expect(challenge.parameters["error"] == "insufficient_claims")
        let claims = try #require(ClaimsChallenge.claims(fromWWWAuthenticate: header))
        let expectedClaims = #"{"access_token":{"nbf":{"essential":true,"value":"1726077595"},"xms_caeerror":{"value":"10012"}}}"#
        #expect(JSONValue.parse(claims) == JSONValue.parse(expectedClaims))
        // The next acquisition must skip the cached token the API refused (it is not expired:
        // serving it again is the outage this case records) and send the claims with cp1.
        let merged = try #require(try ClaimsRequest.merged(claims: claims, capabilities: ["cp1"]))
        #expect(ClaimsRequest.bypassesCache(claims: merged))
        let expectedMerged = #"{"access_token":{"xms_cc":{"values":["cp1"]},"nbf":{"essential":true,"value":"1726077595"},"xms_caeerror":{"value":"10012"}}}"#
        #expect(JSONValue.parse(merged) == JSONValue.parse(expectedMerged))
    }

    @Test("18-graph-401-cae-claims-challenge-unquoted-params: auth-params parsed, claims decoded and merged")
    func case18() throws {
        let header = try #require(Cases.c18.header("www-authenticate"))
        let challenges = AuthenticationChallenge.parse(header)
        #expect(challenges.count == 1)
        let challenge = try #require(challenges.first)
        #expect(challenge.scheme == "Bearer")
        #expect(challenge.parameters["realm"] == "")
        #expect(challenge.parameters["authorization_uri"] == "https://login.microsoftonline.com/common/oauth2/authorize")
        #expect(challenge.parameters["client_id"] == "00000003-0000-0000-c000-000000000000")
        #expect(challenge.parameters["error"] == "insufficient_claims")
        #expect(
            challenge.parameters["claims"]
                == "eyJhY2Nlc3NfdG9rZW4iOnsibmJmIjp7ImVzc2VudGlhbCI6dHJ1ZSwgInZhbHVlIjoiMTY1NzgzNDQxNyJ9fX0=")
        #expect(challenge.parameters["errordescription"]?.hasSuffix("TokenIssuedBeforeRevocationTimestamp") == true)

        let claims = try #require(ClaimsChallenge.claims(fromWWWAuthenticate: header))
        #expect(claims == #"{"access_token":{"nbf":{"essential":true, "value":"1657834417"}}}"#)
        let merged = try #require(try ClaimsRequest.merged(claims: claims, capabilities: ["cp1"]))
        let expected = #"{"access_token":{"xms_cc":{"values":["cp1"]},"nbf":{"essential":true,"value":"1657834417"}}}"#
        #expect(JSONValue.parse(merged) == JSONValue.parse(expected))
        #expect(ClaimsRequest.bypassesCache(claims: merged))
        // The refresh that follows can fail with a revoked grant: interaction_required with the claims.
        #expect(STSErrorMapping.classify(status: 400, headers: [], body: Array(Cases.c05.body.utf8), now: now).problem == .interactionRequired)
    }

    @Test("21-graph-429-no-retry-after-exponential-backoff: backoff with jitter, bounded, then 429 with a suggestion")
    func case21() {
        #expect(Cases.c21.header("Retry-After") == nil)
        let retryAfter = RetryAfter.seconds(Cases.c21.header("retry-after"), now: now)
        #expect(retryAfter == nil)
        let policy = RetryPolicy(target: .downstream(idempotent: true))
        let outcome = RetryPolicy.Outcome.response(status: Cases.c21.status, retryAfterSeconds: retryAfter, nonRetryable: false)
        #expect(policy.decide(attempt: 1, outcome: outcome, deadlineRemaining: 30, random: 0.5) == .retry(afterSeconds: 0.5))
        #expect(policy.decide(attempt: 2, outcome: outcome, deadlineRemaining: 29, random: 0.5) == .retry(afterSeconds: 1.0))
        #expect(policy.decide(attempt: 3, outcome: outcome, deadlineRemaining: 28, random: 0.5) == .giveUp(retryAfterSeconds: 4))
        // A lowercase retry-after header is recognised.
        let lower = STSErrorMapping.classify(status: 429, headers: [("retry-after", "7")], body: Cases.c21.bodyBytes, now: now)
        #expect(lower.retryAfterSeconds == 7)
        #expect(lower.disposition == .throttled)
        #expect(!lower.refreshTokenIsDead)
    }

    @Test("29-obo-invalid-grant-two-error-codes: the assertion's lifetime (500133) decides, not the credential family code 70002 first")
    func case29() {
        let failure = classify(Cases.c29)
        #expect(failure.disposition == .badRequest)
        #expect(failure.disposition != .clientCredentialRejected)
        #expect(failure.problem == .invalidRequest)
        #expect(failure.status == 400)
        #expect(failure.field == "assertion")
        #expect(failure.stsErrorCodes == [70002, 500133])
        #expect(failure.mostSpecificCode == 500133)
        #expect(!failure.refreshTokenIsDead)
        #expect(!failure.isRetryable)
        #expect(failure.traceId == "1a1a1a1a-0000-4000-8000-000000000029")
        #expect(!failure.detail.contains("Trace ID"))
    }

    @Test("30-imported-refresh-token-truncated-9002313: invalid_grant 9002313 is a dead refresh token")
    func case30() {
        let failure = classify(Cases.c30)
        #expect(failure.disposition == .refreshTokenDead)
        #expect(failure.refreshTokenIsDead)
        #expect(!failure.isRetryable)
        #expect(failure.problem == .interactionRequired)
        #expect(failure.status == 409)
        #expect(failure.stsErrorCodes == [9002313])
        #expect(failure.suberror == nil)
        #expect(failure.detail == "AADSTS9002313: Invalid request.")
    }

    @Test("33-aadsts7000012-refresh-token-for-a-different-tenant: 400 invalid_authority, the refresh token alive")
    func case33() {
        let failure = classify(Cases.c33)
        #expect(failure.disposition == .badRequest)
        #expect(!failure.refreshTokenIsDead)
        #expect(!failure.isRetryable)
        #expect(failure.problem == .invalidAuthority)
        #expect(failure.status == 400)
        #expect(failure.stsErrorCodes == [7000012])
        #expect(failure.correlationId == "2b2b2b2b-0000-4000-8000-000000000033")
        #expect(failure.detail == "AADSTS7000012: The grant was obtained for a different tenant.")
    }

    @Test("The health class of each recorded answer: who can make it work again")
    func healthClasses() {
        let expected: [(CaseResponse, FailureClass)] = [
            (Cases.c01, .userAction), (Cases.c02, .userAction), (Cases.c05, .userAction), (Cases.c06, .userAction), (Cases.c08, .userAction),
            (Cases.c30, .userAction), (Cases.c09, .configuration), (Cases.c29, .configuration), (Cases.c33, .configuration),
            (Cases.c10, .transient), (Cases.c11, .transient),
        ]
        for (recorded, failureClass) in expected {
            #expect(classify(recorded).failureClass == failureClass, "\(recorded.id)")
        }
        // No recorded answer needs an administrator; the shape of case 02 with AADSTS53003
        // (Conditional Access block, suberror message_only) does.
        let blocked = Cases.c02.body.replacingOccurrences(of: "50076", with: "53003").replacingOccurrences(of: "basic_action", with: "message_only")
        let failure = STSErrorMapping.classify(status: 400, headers: [], body: Array(blocked.utf8), now: now)
        #expect(failure.failureClass == .adminAction)
        #expect(failure.disposition == .interactionRequired)
    }
}
