import Foundation
import Testing

@testable import IdentityCore

/// A token response and an access token's `uti` are read since issue 30 by `JSONDecoder` into
/// just the members they need, no longer by decoding the whole text into `JSONValue` first. Every
/// shape the identity platform sends (shared/cases) and the edges around it must read as before:
/// the reference below is the reading before issue 30, kept here.
@Suite("Token response and uti reading")
struct TokenResponseReadingTests {
    /// 03-aadsts50079-interaction-required-with-claims (not among the generated fixtures): an
    /// error with `suberror` and `claims`; a token response reading refuses it as before.
    static let interactionRequiredWithClaims = #"""
        {
          "error": "interaction_required",
          "error_description": "AADSTS50079: The user is required to use multi-factor authentication.\r\nTrace ID: 1a1a1a1a-0000-4000-8000-000000000003\r\nCorrelation ID: 2b2b2b2b-0000-4000-8000-000000000003\r\nTimestamp: 2018-03-16 15:03:39Z",
          "error_codes": [50079],
          "timestamp": "2018-03-16 15:03:39Z",
          "trace_id": "1a1a1a1a-0000-4000-8000-000000000003",
          "correlation_id": "2b2b2b2b-0000-4000-8000-000000000003",
          "claims": "{\"access_token\":{\"capolids\":{\"essential\":true,\"values\":[\"01234567-89ab-cdef-fedc-ba9876543210\"]}}}",
          "suberror": "basic_action"
        }
        """#

    /// An Entra ID access token's payload ("Access token claims reference"): strings, numbers,
    /// arrays, a nested object, null, Booleans, and the `uti`.
    static let accessTokenClaims = #"""
        {"aud":"https://graph.microsoft.com","iss":"https://sts.windows.net/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee/","iat":1733390000,
        "nbf":1733390000,"exp":1733394213,"acct":0,"acr":"1","aio":"AVQAq/8YAAAA","amr":["pwd","mfa"],"app_displayname":"Relay",
        "appid":"6731de76-14a6-49ae-97bc-6eba6914391e","appidacr":"1","family_name":"Doe","given_name":"Alice","idtyp":"user",
        "ipaddr":"203.0.113.7","name":"Alice \"Al\" Doe","oid":"66666666-7777-8888-9999-000000000000","platf":"3","puid":"10032001ABCDEF",
        "rh":"0.AXkA.","scp":"Mail.Read User.Read openid profile email","sub":"a-b_c","tenant_region_scope":"EU",
        "tid":"aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee","unique_name":"alice@contoso.example","upn":"alice@contoso.example",
        "uti":"AbCdEfGhIjKlMnOpQrStUv","ver":"1.0","wids":["b79fbf4d-3ef9-4689-8143-76b194e85509"],"xms_cc":["CP1"],
        "xms_ssm":"1","xms_st":{"sub":"x-y_z"},"xms_tcdt":1600000000,"deviceid":null,"ext":true,"ratio":0.25}
        """#

    static let responseEdges = [
        #"{"access_token":"at","expires_in":"3599"}"#, #"{"access_token":"at","expires_in":" 3599 ","ext_expires_in":"x","refresh_in":1800.0}"#,
        #"{"access_token":"at","expires_in":3599.5}"#, #"{"access_token":"at","expires_in":-3}"#, #"{"access_token":"at"}"#,
        #"{"expires_in":3599}"#, #"{"access_token":"","expires_in":3599}"#, #"{"access_token":12,"expires_in":true}"#,
        #"{"access_token":"at","expires_in":3599,"refresh_token":"","foci":1,"scope":null,"token_type":"pop","client_info":["x"]}"#,
        #"{"access_token":"at","expires_in":3599,"refresh_token":"first","refresh_token":"second"}"#,
        #"{"access_token":"at","access_token":"other","expires_in":3599,"id_token":{"nested":[1,2]}}"#,
        #"{"access_token":"at\u00e9\"","expires_in":3599,"unknown":{"a":[true,false,null]}}"#, #"[{"access_token":"at","expires_in":1}]"#,
        #""access_token""#, "3599", "null", "", "not json", "Too Many Requests", #"{"access_token":"at","expires_in":1} x"#,
        #"{"access_token":"at","expires_in":1,}"#, "\u{FEFF}{\"access_token\":\"at\",\"expires_in\":1}",
    ]

    static let utiPayloads = [
        accessTokenClaims, #"{"uti":"abc_DEF-123"}"#, #"{"uti":12}"#, #"{"uti":null}"#, #"{"uti":"bad uti!"}"#, #"{"uti":""}"#,
        #"{"uti":"first","uti":"second"}"#, #"{"uti":["x"]}"#, #"{"sub":"x"}"#, #"["uti"]"#, #""uti""#, "not json", "",
        #"{"uti":"x","other":{"uti":"y"}}"#,
    ]

    @Test("every case's body and the edges around a token response read as before: the same tokens, numbers and refusals")
    func tokenResponses() {
        let cases = [
            Cases.c01, Cases.c02, Cases.c05, Cases.c06, Cases.c08, Cases.c09, Cases.c10, Cases.c11, Cases.c13, Cases.c14, Cases.c16, Cases.c18,
            Cases.c19, Cases.c21, Cases.c29, Cases.c30, Cases.c33,
        ].map(\.body)
        var read = 0
        for body in cases + [Self.interactionRequiredWithClaims] + Self.responseEdges {
            let now = Self.reading(try TokenResponse.parse(Array(body.utf8)))
            #expect(now == Self.reading(try Self.parseBefore(Array(body.utf8))), "\(body.debugDescription)")
            if now.hasPrefix("tokens") { read += 1 }
        }
        #expect(read >= 9)  // c13, c14, c16 and the usable edges were read, not only refused
        let rotated = try? TokenResponse.parse(Cases.c13.bodyBytes)
        #expect(rotated?.refreshIn == 2106 && rotated?.expiresIn == 4213 && rotated?.foci == "1" && rotated?.refreshToken != nil)
        #expect((try? TokenResponse.parse(Array(Self.responseEdges[9].utf8)))?.refreshToken == "first")
        // Error bodies are read by `STSErrorResponse` (unchanged): suberror, codes and claims as the case says.
        let withClaims = STSErrorResponse.parse(Array(Self.interactionRequiredWithClaims.utf8))
        #expect(withClaims.suberror == "basic_action" && withClaims.errorCodes == [50079])
        #expect(withClaims.claims == #"{"access_token":{"capolids":{"essential":true,"values":["01234567-89ab-cdef-fedc-ba9876543210"]}}}"#)
    }

    @Test("an access token's uti reads as before from every payload shape; only a uti of base64url characters is kept")
    func utis() {
        for payload in Self.utiPayloads {
            let token = "e30." + Base64URL.encode(Array(payload.utf8)) + ".c2ln"
            #expect(AccessTokenIdentifier.uti(of: token) == Self.utiBefore(token), "\(payload.debugDescription)")
        }
        #expect(AccessTokenIdentifier.uti(of: "e30." + Base64URL.encode(Array(Self.accessTokenClaims.utf8)) + ".c2ln") == "AbCdEfGhIjKlMnOpQrStUv")
        #expect(AccessTokenIdentifier.uti(of: "e30." + Base64URL.encode(Array(#"{"uti":"first","uti":"second"}"#.utf8)) + ".c2ln") == "first")
        for token in ["opaque", "a.b", "a.b.c.d", "e30..c2ln", "e30.!!!.c2ln", "." + Base64URL.encode(Array(#"{"uti":"x"}"#.utf8)) + "."] {
            #expect(AccessTokenIdentifier.uti(of: token) == Self.utiBefore(token), "\(token)")
        }
    }

    /// Every field of a reading, or the refusal's detail: equal readings give equal text.
    static func reading(_ parse: @autoclosure () throws -> TokenResponse) -> String {
        do {
            let r = try parse()
            let fields: [String?] = [
                r.accessToken, r.tokenType, String(r.expiresIn), r.extExpiresIn.map(String.init), r.refreshIn.map(String.init), r.scope, r.refreshToken,
                r.idToken, r.clientInfo, r.foci,
            ]
            return "tokens \(fields.map { $0 ?? "nil" })"
        } catch {
            return "refused \(error)"
        }
    }

    /// `TokenResponse.parse` before issue 30: the whole body decoded into `JSONValue`.
    static func parseBefore(_ body: [UInt8]) throws -> TokenResponse {
        guard let object = JSONValue.parse(body)?.objectValue else { throw TokenResponseError(detail: "token response is not a JSON object") }
        func text(_ key: String) -> String? {
            switch object[key] {
            case .string(let value)?: return value.isEmpty ? nil : value
            case .number?: return object[key]?.intValue.map(String.init)
            default: return nil
            }
        }
        guard let accessToken = text("access_token") else { throw TokenResponseError(detail: "access_token is missing") }
        guard let expiresIn = object["expires_in"]?.intValue else { throw TokenResponseError(detail: "expires_in is missing or not a number") }
        return TokenResponse(
            accessToken: accessToken, tokenType: text("token_type") ?? "Bearer", expiresIn: expiresIn, extExpiresIn: object["ext_expires_in"]?.intValue,
            refreshIn: object["refresh_in"]?.intValue, scope: text("scope"), refreshToken: text("refresh_token"), idToken: text("id_token"),
            clientInfo: text("client_info"), foci: text("foci"))
    }

    /// `AccessTokenIdentifier.uti(of:)` before issue 30.
    static func utiBefore(_ accessToken: String) -> String? {
        let parts = accessToken.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = Base64URL.decodeThroughFoundation(String(decoding: parts[1], as: UTF8.self)),
            let uti = JSONValue.parse(payload)?.objectValue?["uti"]?.stringValue
        else { return nil }
        return AccessTokenIdentifier.isIdentifier(uti) ? uti : nil
    }
}
