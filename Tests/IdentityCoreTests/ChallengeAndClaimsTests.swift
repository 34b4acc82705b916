import Foundation
import Testing

@testable import IdentityCore

@Suite("WWW-Authenticate (RFC 9110 §11.6.1) and claims (behaviour §1)")
struct ChallengeAndClaimsTests {
    @Test("several challenges, quoted escapes, token68, case-insensitive names")
    func challenges() {
        let parsed = AuthenticationChallenge.parse(
            #"Basic realm="a \"b\" c", Bearer REALM=x, error="invalid_token", Negotiate abc123=="#)
        #expect(parsed.count == 3)
        #expect(parsed[0].scheme == "Basic")
        #expect(parsed[0].parameters == ["realm": #"a "b" c"#])
        #expect(parsed[1].scheme == "Bearer")
        #expect(parsed[1].parameters == ["realm": "x", "error": "invalid_token"])
        #expect(parsed[2].scheme == "Negotiate")
        #expect(parsed[2].token68 == "abc123==")
        #expect(parsed[2].parameters.isEmpty)
    }

    @Test("a bare scheme and an empty header")
    func bare() {
        #expect(AuthenticationChallenge.parse("Bearer") == [AuthenticationChallenge(scheme: "Bearer", parameters: [:])])
        #expect(AuthenticationChallenge.parse("").isEmpty)
        #expect(AuthenticationChallenge.parse(#"Bearer realm="tokenrelay""#).first?.parameters["realm"] == "tokenrelay")
    }

    @Test("a base64 claims value with '=' padding is kept whole, also unquoted at the end")
    func padding() {
        let header = #"Bearer error=insufficient_claims, claims=eyJhY2Nlc3NfdG9rZW4iOnt9fQ=="#
        #expect(AuthenticationChallenge.parse(header).first?.parameters["claims"] == "eyJhY2Nlc3NfdG9rZW4iOnt9fQ==")
        #expect(ClaimsChallenge.claims(fromWWWAuthenticate: header) == #"{"access_token":{}}"#)
    }

    @Test("claims only from a Bearer challenge with insufficient_claims")
    func onlyInsufficientClaims() {
        #expect(ClaimsChallenge.claims(fromWWWAuthenticate: #"Bearer error="invalid_token", claims="eyJhIjoxfQ==""#) == nil)
        #expect(ClaimsChallenge.claims(fromWWWAuthenticate: #"Basic error="insufficient_claims", claims="eyJhIjoxfQ==""#) == nil)
        #expect(ClaimsChallenge.claims(fromWWWAuthenticate: #"Bearer error="insufficient_claims", claims="!!!""#) == nil)
        #expect(ClaimsChallenge.claims(fromWWWAuthenticate: #"Bearer error="insufficient_claims", claims="eyJhIjoxfQ==""#) == #"{"a":1}"#)
    }

    @Test("capabilities only: merged, but they do not bypass the cache")
    func capabilitiesOnly() throws {
        let merged = try ClaimsRequest.merged(claims: nil, capabilities: ["cp1"])
        #expect(merged == #"{"access_token":{"xms_cc":{"values":["cp1"]}}}"#)
        #expect(!ClaimsRequest.bypassesCache(claims: merged))
        #expect(!ClaimsRequest.bypassesCache(claims: nil))
        #expect(!ClaimsRequest.bypassesCache(claims: "{}"))
        #expect(try ClaimsRequest.merged(claims: nil, capabilities: []) == nil)
        #expect(try ClaimsRequest.merged(claims: " ", capabilities: []) == nil)
    }

    @Test("merging unions capabilities and keeps other claims; base64 input accepted")
    func merging() throws {
        let claims = #"{"access_token":{"xms_cc":{"values":["cp2"]},"acrs":{"essential":true,"value":"c1"}},"id_token":{"auth_time":{"essential":true}}}"#
        let base64 = Data(claims.utf8).base64EncodedString()
        let merged = try #require(try ClaimsRequest.merged(claims: base64, capabilities: ["cp1", "cp2"]))
        #expect(
            merged
                == #"{"access_token":{"acrs":{"essential":true,"value":"c1"},"xms_cc":{"values":["cp2","cp1"]}},"id_token":{"auth_time":{"essential":true}}}"#
        )
        #expect(ClaimsRequest.bypassesCache(claims: merged))
        #expect(ClaimsRequest.bypassesCache(claims: #"{"id_token":{"x":1}}"#))
        #expect(ClaimsRequest.bypassesCache(claims: "not claims"))
        #expect(throws: ClaimsError.self) { try ClaimsRequest.merged(claims: "[1]", capabilities: ["cp1"]) }
    }

    @Test("normalize: JSON text and base64url give the same compact sorted text")
    func normalize() throws {
        let text = #"{ "b": 1, "a": {"y": true, "x": null} }"#
        let base64url = Base64URL.encode(Array(text.utf8))
        #expect(try ClaimsRequest.normalize(text) == #"{"a":{"x":null,"y":true},"b":1}"#)
        #expect(try ClaimsRequest.normalize(base64url) == #"{"a":{"x":null,"y":true},"b":1}"#)
        #expect(throws: ClaimsError.self) { try ClaimsRequest.normalize("%%%") }
    }
}

@Suite("Token freshness (behaviour §1, §5, §12)")
struct TokenFreshnessTests {
    @Test("served iff expires_on − now ≥ max(expiry_skew, min_ttl)")
    func boundary() {
        let t = CachedTokenTimes(expiresOn: 10_000)
        #expect(TokenFreshness.evaluate(t, now: 9_700, expirySkew: 300, minTTL: 0) == .fresh)
        #expect(TokenFreshness.evaluate(t, now: 9_701, expirySkew: 300, minTTL: 0) == .expired)
        #expect(TokenFreshness.evaluate(t, now: 9_000, expirySkew: 300, minTTL: 1_000) == .fresh)
        #expect(TokenFreshness.evaluate(t, now: 9_001, expirySkew: 300, minTTL: 1_000) == .expired)
        #expect(TokenFreshness.evaluate(t, now: 9_700, expirySkew: 300, minTTL: 100) == .fresh)
    }

    @Test("refresh_on starts a background refresh while still serving")
    func refreshDue() {
        let t = CachedTokenTimes(expiresOn: 10_000, refreshOn: 8_000)
        #expect(TokenFreshness.evaluate(t, now: 7_999, expirySkew: 300, minTTL: 0) == .fresh)
        #expect(TokenFreshness.evaluate(t, now: 8_000, expirySkew: 300, minTTL: 0) == .refreshDue)
        #expect(TokenFreshness.evaluate(t, now: 9_800, expirySkew: 300, minTTL: 0) == .expired)
    }

    @Test("past the margin but before ext_expires_on: outage fallback only")
    func extended() {
        let t = CachedTokenTimes(expiresOn: 10_000, extExpiresOn: 13_600)
        #expect(TokenFreshness.evaluate(t, now: 9_900, expirySkew: 300, minTTL: 0) == .extendedOnly)
        #expect(TokenFreshness.evaluate(t, now: 13_599, expirySkew: 300, minTTL: 0) == .extendedOnly)
        #expect(TokenFreshness.evaluate(t, now: 13_600, expirySkew: 300, minTTL: 0) == .expired)
    }
}

@Suite("Problem codes (behaviour §4, §12)")
struct ProblemCodeTests {
    @Test(
        "status, type URI and title per code",
        arguments: [
            (ProblemCode.invalidRequest, 400), (.invalidScope, 400), (.invalidAuthority, 400), (.unauthenticated, 401),
            (.forbidden, 403), (.tenantSuspended, 403), (.accountNotFound, 404), (.notFound, 404), (.methodNotAllowed, 405), (.interactionRequired, 409),
            (.userCanceled, 400), (.userMismatch, 409), (.ambiguousAccount, 409), (.conflict, 409), (.serverDeclinedScopes, 409), (.throttled, 429),
            (.rateLimited, 429),
            (.payloadTooLarge, 413), (.uriTooLong, 414), (.headerFieldsTooLarge, 431), (.unsupportedMediaType, 415), (.expectationFailed, 417),
            (.notImplemented, 501), (.upstreamError, 502),
            (.upstreamUnavailable, 503),
            (.internal, 500),
        ])
    func codes(code: ProblemCode, status: Int) {
        #expect(code.status == status)
        #expect(code.typeURI == "urn:tokenrelay:problem:\(code.rawValue)")
        #expect(!code.title.isEmpty)
    }

    @Test("every code is listed")
    func allListed() {
        #expect(ProblemCode.allCases.count == 26)
        #expect(ProblemCode.internal.rawValue == "internal")
        #expect(ProblemCode.accountNotFound.rawValue == "account_not_found")
    }
}
