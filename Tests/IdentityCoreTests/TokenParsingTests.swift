import Foundation
import Testing

@testable import IdentityCore

@Suite("JSON, client_info and token responses (behaviour §1, §5 lenient parsing)")
struct TokenParsingTests {
    @Test("JSONValue accessors; intValue accepts digit strings only")
    func jsonAccessors() throws {
        let value = try #require(JSONValue.parse(#"{"a":"3599","b":4213,"c":1.5,"d":true,"e":null,"f":[1],"g":"-1","h":" 12 "}"#))
        #expect(value["a"]?.intValue == 3599)
        #expect(value["b"]?.intValue == 4213)
        #expect(value["c"]?.intValue == nil)
        #expect(value["d"]?.boolValue == true)
        #expect(value["d"]?.intValue == nil)
        #expect(value["e"] == .null)
        #expect(value["f"]?.arrayValue == [.number(1)])
        #expect(value["g"]?.intValue == nil)
        #expect(value["h"]?.intValue == 12)
        #expect(value.objectValue?.count == 8)
        #expect(JSONValue.parse("not json") == nil)
    }

    @Test("compact sorted JSON text is deterministic and escapes strings")
    func compactText() throws {
        let value = try #require(JSONValue.parse(#"{"b":[1,2.5,"x\"y"],"a":{"d":false,"c":null}}"#))
        #expect(value.compactSortedText == #"{"a":{"c":null,"d":false},"b":[1,2.5,"x\"y"]}"#)
        #expect(JSONValue.parse(value.compactSortedText) == value)
    }

    @Test("client_info: base64url without padding, with padding, and errors")
    func clientInfo() throws {
        let unpadded = "eyJ1aWQiOiI2NjY2NjY2Ni03Nzc3LTg4ODgtOTk5OS0wMDAwMDAwMDAwMDAiLCJ1dGlkIjoiYWFhYWFhYWEtYmJiYi1jY2NjLWRkZGQtZWVlZWVlZWVlZWVlIn0"
        let info = try ClientInfo.decode(unpadded)
        #expect(info == ClientInfo(uid: "66666666-7777-8888-9999-000000000000", utid: "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"))
        #expect(try ClientInfo.decode(unpadded + "=") == info)
        // B2C: uid is {oid}-{policy}, taken as sent.
        let b2c = Base64URL.encode(Array(#"{"uid":"1234-b2c_1_susi","utid":"tenant"}"#.utf8))
        #expect(try ClientInfo.decode(b2c).homeAccountId == "1234-b2c_1_susi.tenant")
        #expect(throws: ClientInfoError.self) { try ClientInfo.decode("!!!") }
        #expect(throws: ClientInfoError.self) { try ClientInfo.decode(Base64URL.encode(Array("[1]".utf8))) }
        #expect(throws: ClientInfoError.self) { try ClientInfo.decode(Base64URL.encode(Array(#"{"uid":"x"}"#.utf8))) }
    }

    @Test(
        "client_info names the user of a home_account_id as MSAL compares them: same uid and utid ignoring case; for B2C the object id before the policy"
    )
    func clientInfoIsUser() {
        let alice = ClientInfo(uid: "aaaaaaaa-0000-4000-8000-00000000a11c", utid: "11111111-1111-1111-1111-111111111111")
        #expect(alice.isUser(of: "aaaaaaaa-0000-4000-8000-00000000a11c.11111111-1111-1111-1111-111111111111", b2c: false))
        #expect(alice.isUser(of: "AAAAAAAA-0000-4000-8000-00000000A11C.11111111-1111-1111-1111-111111111111", b2c: false))
        #expect(!alice.isUser(of: "bbbbbbbb-0000-4000-8000-000000000b0b.11111111-1111-1111-1111-111111111111", b2c: false))
        #expect(!alice.isUser(of: "aaaaaaaa-0000-4000-8000-00000000a11c.22222222-2222-2222-2222-222222222222", b2c: false), "another home tenant")
        #expect(!alice.isUser(of: "no-dot", b2c: false))
        let dave = ClientInfo(uid: "dddddddd-0000-4000-8000-00000000da7e-b2c_1_signin", utid: "33333333-3333-3333-3333-333333333333")
        let susi = "dddddddd-0000-4000-8000-00000000da7e-b2c_1_susi.33333333-3333-3333-3333-333333333333"
        #expect(dave.isUser(of: susi, b2c: true), "another user flow of the same B2C user")
        #expect(!dave.isUser(of: susi, b2c: false), "outside B2C the uid is compared whole")
        #expect(!dave.isUser(of: "eeeeeeee-0000-4000-8000-00000000da7e-b2c_1_susi.33333333-3333-3333-3333-333333333333", b2c: true))
    }

    @Test("token response: numbers as digit strings, empty refresh token is nil, defaults")
    func lenient() throws {
        let body = #"{"access_token":"at","expires_in":"3599","ext_expires_in":"7199","refresh_in":1800,"refresh_token":"","foci":1}"#
        let response = try TokenResponse.parse(Array(body.utf8))
        #expect(response.expiresIn == 3599)
        #expect(response.extExpiresIn == 7199)
        #expect(response.refreshIn == 1800)
        #expect(response.refreshToken == nil)
        #expect(response.tokenType == "Bearer")
        #expect(response.foci == "1")
        #expect(response.scope == nil)
    }

    @Test(
        "token response: unusable bodies throw",
        arguments: [#"{"expires_in":3599}"#, #"{"access_token":"at"}"#, #"{"access_token":"at","expires_in":"soon"}"#, "[]", "<html>"])
    func unusable(body: String) {
        #expect(throws: TokenResponseError.self) { try TokenResponse.parse(Array(body.utf8)) }
    }

    @Test("STS error codes from the description: AADSTS and AADB2C, in order, without repeats")
    func descriptionCodes() {
        #expect(
            STSErrorResponse.codes(in: "AADSTS50076: x AADSTS50076 y AADB2C90080: z AADSTS")
                == [.aadsts(50076), .aadb2c(90080)])
        let parsed = STSErrorResponse.parse(Array(#"{"error":"invalid_grant","error_codes":["70008"]}"#.utf8))
        #expect(parsed.errorCodes == [70008])
        #expect(STSErrorCode.aadb2c(90080).description == "AADB2C90080")
    }
}

@Suite("JWT and id_token validation (OIDC Core §3.1.3.7)")
struct IDTokenTests {
    struct Verifier: JWTSignatureVerifier {
        let keyId: String
        func verify(algorithm: String, keyId: String?, signingInput: [UInt8], signature: [UInt8]) -> Bool {
            // Stands in for RSA: the "signature" is the signing input reversed.
            keyId == self.keyId && signature == signingInput.reversed()
        }
    }

    static let clientId = "11111111-2222-3333-4444-555555555555"
    static let tid = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
    let now = 1_700_000_000

    func token(
        alg: String = "RS256", kid: String = "k1", claims: [String: JSONValue]? = nil, tamper: Bool = false
    ) -> String {
        let header = JSONValue.object(["alg": .string(alg), "kid": .string(kid), "typ": .string("JWT")]).compactSortedText
        let payload = JSONValue.object(
            claims ?? [
                "iss": .string("https://login.microsoftonline.com/\(Self.tid)/v2.0"), "aud": .string(Self.clientId),
                "tid": .string(Self.tid), "oid": .string("oid-1"), "sub": .string("sub-1"), "nonce": .string("n-1"),
                "preferred_username": .string("adele@contoso.com"), "name": .string("Adele"),
                "exp": .number(Double(now + 3600)), "iat": .number(Double(now)), "nbf": .number(Double(now)),
            ]
        ).compactSortedText
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
        var signature = Array(Array(input.utf8).reversed())
        if tamper { signature[0] ^= 1 }
        return input + "." + Base64URL.encode(signature)
    }

    func validate(_ compact: String, issuer: String = "https://login.microsoftonline.com/{tenantid}/v2.0", nonce: String? = "n-1", now: Int? = nil)
        throws -> IDTokenClaims
    {
        try IDTokenValidator(clientId: Self.clientId).validate(
            try JWT.parse(compact), expectedIssuer: issuer, nonce: nonce, now: now ?? self.now, verifier: Verifier(keyId: "k1"))
    }

    func failedCheck(_ body: () throws -> Void) -> IDTokenError.Check? {
        do {
            try body()
            return nil
        } catch let error as IDTokenError {
            return error.check
        } catch {
            return .malformed
        }
    }

    @Test("a good token validates; {tenantid} is substituted with tid; claims are read")
    func valid() throws {
        let claims = try validate(token())
        #expect(claims.oid == "oid-1")
        #expect(claims.tid == Self.tid)
        #expect(claims.username == "adele@contoso.com")
        #expect(claims.audience == Self.clientId)
        #expect(claims.expiresAt == now + 3600)
        #expect(try validate(token(), issuer: "https://login.microsoftonline.com/\(Self.tid)/v2.0").sub == "sub-1")
    }

    @Test("An access token's uti: read from a JWS payload; nil for an opaque token, a JWS without one, or one that is not base64url")
    func accessTokenIdentifier() {
        func jws(_ claims: String) -> String { "e30." + Base64URL.encode(Array(claims.utf8)) + ".c2ln" }
        #expect(AccessTokenIdentifier.uti(of: jws(#"{"uti":"Q7ZkVbA3hEe9x0pWm2LrAA","oid":"x"}"#)) == "Q7ZkVbA3hEe9x0pWm2LrAA")
        #expect(AccessTokenIdentifier.uti(of: jws(#"{"oid":"x"}"#)) == nil)
        #expect(AccessTokenIdentifier.uti(of: jws(#"{"uti":"a b"}"#)) == nil)
        #expect(AccessTokenIdentifier.uti(of: jws(#"{"uti":""}"#)) == nil)
        #expect(AccessTokenIdentifier.uti(of: jws(#"{"uti":7}"#)) == nil)
        #expect(AccessTokenIdentifier.uti(of: jws("{\"uti\":\"" + String(repeating: "a", count: 129) + "\"}")) == nil)
        // A personal account's token is often opaque (no dots, or not JSON between them).
        #expect(AccessTokenIdentifier.uti(of: "EwBwA8l6BAAUbDba3x2OMJElkF7gJ4z/VbCPEz0AAQ") == nil)
        #expect(AccessTokenIdentifier.uti(of: "a.b.c") == nil)
        #expect(AccessTokenIdentifier.uti(of: "e30.e30") == nil)
    }

    @Test("JWT.parse: header fields, signing input, malformed input")
    func parse() throws {
        let compact = token()
        let jwt = try JWT.parse(compact)
        #expect(jwt.algorithm == "RS256")
        #expect(jwt.keyId == "k1")
        #expect(String(decoding: jwt.signingInput, as: UTF8.self) == compact.split(separator: ".")[0...1].joined(separator: "."))
        #expect(throws: JWTError.self) { try JWT.parse("a.b") }
        #expect(throws: JWTError.self) { try JWT.parse("!!.e30.") }
        #expect(throws: JWTError.self) { try JWT.parse("e30.bm90IGpzb24.") }
    }

    @Test("each failed check is named")
    func failures() {
        #expect(failedCheck { _ = try validate(token(alg: "none")) } == .algorithm)
        #expect(failedCheck { _ = try validate(token(alg: "HS256")) } == .algorithm)
        #expect(failedCheck { _ = try validate(token(tamper: true)) } == .signature)
        #expect(failedCheck { _ = try validate(token(kid: "other")) } == .signature)
        #expect(failedCheck { _ = try validate(token(), issuer: "https://login.microsoftonline.com/other/v2.0") } == .issuer)
        #expect(failedCheck { _ = try validate(token(), nonce: "n-2") } == .nonce)
        #expect(failedCheck { _ = try validate(token(), now: now + 3600 + 300) } == .expired)
        #expect(failedCheck { _ = try validate(token(), now: now - 301) } == .notYetValid)
        var claims = try! JWT.parse(token()).claims
        claims["aud"] = .string("someone-else")
        #expect(failedCheck { _ = try validate(token(claims: claims)) } == .audience)
        claims["aud"] = .array([.string(Self.clientId), .string("other")])
        #expect(failedCheck { _ = try validate(token(claims: claims)) } == .audience)
        claims["azp"] = .string(Self.clientId)
        #expect(failedCheck { _ = try validate(token(claims: claims)) } == nil)
        claims.removeValue(forKey: "tid")
        #expect(failedCheck { _ = try validate(token(claims: claims)) } == .issuer)
    }

    @Test("clock skew is tolerated within allowedClockSkew")
    func skew() throws {
        #expect(try validate(token(), now: now + 3600 + 299).oid == "oid-1")
        #expect(try validate(token(), now: now - 300).oid == "oid-1")
    }

    /// RFC 7519 §2: a NumericDate may be non-integer; a fractional `exp` read as no `exp` at all
    /// failed the token as "exp is missing".
    @Test("exp, nbf and iat are NumericDates: a fraction is read in whole seconds, rounded down")
    func fractionalNumericDates() {
        let claims = IDTokenClaims(["exp": .number(1_700_000_000.5), "nbf": .number(1_699_999_999.9), "iat": .number(-1.5)])
        #expect(claims.expiresAt == 1_700_000_000 && claims.notBefore == 1_699_999_999 && claims.issuedAt == -2)
        #expect(IDTokenClaims(["exp": .number(.infinity)]).expiresAt == nil && IDTokenClaims(["exp": .number(1e16)]).expiresAt == nil)
        #expect(IDTokenClaims(["exp": .string("1700000000")]).expiresAt == 1_700_000_000 && IDTokenClaims(["exp": .bool(true)]).expiresAt == nil)
    }

    @Test("B2C: username falls back to the first of emails")
    func b2cUsername() {
        let claims = IDTokenClaims(["emails": .array([.string("a@b.com"), .string("c@d.com")]), "aud": .array([.string("x")])])
        #expect(claims.username == "a@b.com")
        #expect(claims.audiences == ["x"])
    }
}

@Suite("base64url codec (RFC 4648 §5)")
struct Base64URLTests {
    @Test("round trip, padding optional, standard alphabet accepted, impossible lengths rejected")
    func codec() {
        let bytes: [UInt8] = [0xfb, 0xff, 0xbf, 0x01]
        let encoded = Base64URL.encode(bytes)
        #expect(encoded == "-_-_AQ")
        #expect(Base64URL.decode(encoded) == bytes)
        #expect(Base64URL.decode("+/+/AQ==") == bytes)
        #expect(Base64URL.decode("A") == nil)
        #expect(Base64URL.decode("") == [])
    }
}
