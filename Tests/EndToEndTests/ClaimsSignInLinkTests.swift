import Foundation
import HTTPClientBridge
import Testing
import TokenRelayTesting

/// A `sign_in_url` carries the claims challenge all the way to the authority (behaviour §1 "Claims
/// challenge", §3, §4, §12 Problems; issue 10 item 1): the authorize request it starts holds the
/// problem's `claims` merged with `xms_cc` (identity platform "Claims challenges, claims requests,
/// and client capabilities": the app sends the challenge as the `claims` parameter of its next
/// interactive request), `login_hint`, the scopes, PKCE S256 and `client_info=1`; the sign-in it
/// starts completes, and the next silent request with those claims succeeds, for every way a
/// challenge reaches TokenRelay.
@Suite("A sign_in_url carries the claims challenge to the authorize request", .serialized)
struct ClaimsSignInLinkTests {
    static let alice = "alice@contoso.example"
    /// Case 03's claims (a Conditional Access policy id).
    static let capolids = #"{"access_token":{"capolids":{"essential":true,"values":["01234567-89ab-cdef-fedc-ba9876543210"]}}}"#
    /// An authentication-context claims request.
    static let acrs = #"{"access_token":{"acrs":{"essential":true,"value":"c1"}}}"#
    /// Case 18's claims, decoded from the `WWW-Authenticate` base64.
    static let nbf = #"{"access_token":{"nbf":{"essential":true, "value":"1657834417"}}}"#
    /// Case 19's claims (nbf and xms_caeerror).
    static let caeError = #"{"access_token":{"nbf":{"essential":true,"value":"1726077595"},"xms_caeerror":{"value":"10012"}}}"#

    /// Case 03's token-endpoint body, verbatim: `error=interaction_required`, claims as JSON text.
    static var case03Body: [String: Any] {
        [
            "error": "interaction_required",
            "error_description":
                "AADSTS50079: The user is required to use multi-factor authentication.\r\nTrace ID: 1a1a1a1a-0000-4000-8000-000000000003\r\nCorrelation ID: 2b2b2b2b-0000-4000-8000-000000000003\r\nTimestamp: 2018-03-16 15:03:39Z",
            "error_codes": [50079], "timestamp": "2018-03-16 15:03:39Z", "trace_id": "1a1a1a1a-0000-4000-8000-000000000003",
            "correlation_id": "2b2b2b2b-0000-4000-8000-000000000003", "claims": capolids, "suberror": "basic_action",
        ]
    }

    /// Each way the token endpoint sends a challenge: the emulator fault, and the claims it carries.
    static var stsChallenges: [(name: String, fault: [String: Any], claims: String)] {
        [
            ("03-aadsts50079-interaction-required-with-claims", ["endpoint": "token", "status": 400, "body": case03Body], capolids),
            (
                "invalid_grant with a suberror and claims",
                ["endpoint": "token", "error": "invalid_grant", "error_codes": [50076], "suberror": "basic_action", "claims_challenge": acrs], acrs
            ),
            ("claims as JSON text", ["endpoint": "token", "error": "interaction_required", "claims_challenge": acrs, "claims_encoding": "json"], acrs),
            ("claims as an object", ["endpoint": "token", "error": "interaction_required", "claims_challenge": acrs, "claims_encoding": "object"], acrs),
            ("claims as base64", ["endpoint": "token", "error": "interaction_required", "claims_challenge": acrs, "claims_encoding": "base64"], acrs),
        ]
    }

    static func object(_ text: String?) -> NSDictionary? {
        guard let text else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? NSDictionary
    }

    /// `claims` with `access_token.xms_cc.values` set to `capabilities` (none: unchanged).
    static func withCapabilities(_ claims: String, _ capabilities: [String]) throws -> NSDictionary {
        let root = try #require(object(claims)?.mutableCopy() as? NSMutableDictionary)
        guard !capabilities.isEmpty else { return root }
        let accessToken = (root["access_token"] as? NSDictionary)?.mutableCopy() as? NSMutableDictionary ?? NSMutableDictionary()
        accessToken["xms_cc"] = ["values": capabilities]
        root["access_token"] = accessToken
        return root
    }

    /// Follows `signInURL` (the signed start link) to the authority; checks the authorize request;
    /// completes the sign-in through the emulator and TokenRelay's callback.
    static func followAndSignIn(
        _ stack: TokenRelayStack, signInURL: String, expectedClaims: NSDictionary, _ label: String
    ) async throws {
        let start = try await stack.request("GET", signInURL, authenticated: false)
        #expect(start.status == 302, "\(label): \(start.text)")
        let authorize = try #require(start.headers["Location"], "\(label)")
        #expect(authorize.hasPrefix(stack.emulator.baseURL + "/"), "\(label): \(authorize)")
        let items = try #require(URLComponents(string: authorize)?.queryItems, "\(label)")
        func value(_ name: String) -> String? { items.first { $0.name == name }?.value }
        #expect(Self.object(value("claims")) == expectedClaims, "\(label): authorize claims \(value("claims") ?? "none")")
        #expect(value("login_hint") == Self.alice, "\(label)")
        let scopes = Set((value("scope") ?? "").split(separator: " ").map { $0.lowercased() })
        #expect(scopes.contains { $0.hasSuffix("user.read") }, "\(label): \(value("scope") ?? "")")
        #expect(scopes.isSuperset(of: ["openid", "profile", "offline_access"]), "\(label): \(value("scope") ?? "")")
        #expect(value("code_challenge_method") == "S256", "\(label)")
        #expect((value("code_challenge") ?? "").count == 43, "\(label)")
        #expect(value("client_info") == "1", "\(label)")
        #expect(value("response_type") == "code", "\(label)")

        let redirect = try await stack.http.execute(HTTPClientRequest(method: "GET", url: authorize))
        #expect(redirect.status == 302, "\(label)")
        let callback = try await stack.request("GET", try #require(redirect.headers["Location"], "\(label)"), authenticated: false)
        #expect(callback.status == 200, "\(label): \(callback.text)")
        #expect((callback.json["account"] as? [String: Any])?["username"] as? String == Self.alice, "\(label)")
    }

    @Test(
        "Every token-endpoint challenge (case 03, invalid_grant with suberror, JSON text, object, base64): the link's authorize request holds the claims with xms_cc; the sign-in completes and the next silent request with the claims succeeds"
    )
    func stsChallengesReachTheAuthorizeRequest() async throws {
        let stack = try await TokenRelayStack(name: "e2e_claims_link_sts", environment: ["TOKENRELAY_CLIENT_CAPABILITIES": "cp1"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        for challenge in Self.stsChallenges {
            let queued = try await stack.control("POST", "/_control/faults", json: challenge.fault.merging(["username": Self.alice]) { $1 })
            #expect(queued.status == 201, "\(challenge.name): \(queued.text)")
            let refused = try await stack.request(
                "POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
            #expect(refused.status == 409, "\(challenge.name): \(refused.text)")
            #expect(refused.json["error"] as? String == "interaction_required", "\(challenge.name)")
            let claims = try #require(refused.json["claims"] as? String, "\(challenge.name): \(refused.text)")
            #expect(Self.object(claims) == Self.object(challenge.claims), "\(challenge.name): \(claims)")
            let signInURL = try #require(refused.json["sign_in_url"] as? String, "\(challenge.name)")
            try await Self.followAndSignIn(stack, signInURL: signInURL, expectedClaims: try Self.withCapabilities(claims, ["cp1"]), challenge.name)

            // The sign-in met the challenge: the same claims now get a token silently.
            let again = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "claims": claims])
            #expect(again.status == 200, "\(challenge.name): \(again.text)")
            #expect(again.json["source"] as? String == "refresh", "\(challenge.name)")
        }
    }

    @Test("Case 03 without client capabilities: the authorize request holds exactly the STS's claims")
    func case03WithoutCapabilities() async throws {
        let stack = try await TokenRelayStack(name: "e2e_claims_link_nocaps")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "status": 400, "body": Self.case03Body])
        let refused = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(refused.status == 409, "\(refused.text)")
        #expect(refused.json["suberror"] as? String == "basic_action")
        let signInURL = try #require(refused.json["sign_in_url"] as? String)
        try await Self.followAndSignIn(stack, signInURL: signInURL, expectedClaims: try #require(Self.object(Self.capolids)), "case 03")
    }

    @Test(
        "A downstream API's WWW-Authenticate claims (cases 18 and 19) whose re-acquisition needs interaction: the link's authorize request holds the API's claims with xms_cc; after the sign-in the call and a silent request with the claims succeed"
    )
    func downstreamChallengeReachesTheAuthorizeRequest() async throws {
        let stack = try await TokenRelayStack(name: "e2e_claims_link_downstream", environment: ["TOKENRELAY_CLIENT_CAPABILITIES": "cp1"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        for (name, claims) in [("18-graph-401-cae-claims-challenge-unquoted-params", Self.nbf), ("19-graph-401-cae-outdated-policies", Self.caeError)] {
            _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "graph", "username": Self.alice, "claims_challenge": claims])
            // The re-acquisition with the API's claims needs interaction (MFA, no claims of its own).
            _ = try await stack.control(
                "POST", "/_control/faults", json: ["endpoint": "token", "username": Self.alice, "error": "interaction_required", "error_codes": [50079]])
            let me = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id])
            #expect(me.status == 409, "\(name): \(me.text)")
            #expect(me.json["error"] as? String == "interaction_required", "\(name)")
            #expect(Self.object(me.json["claims"] as? String) == Self.object(claims), "\(name): \(me.text)")
            #expect(me.headers["WWW-Authenticate"]?.contains(#"error="insufficient_claims""#) == true, "\(name)")
            let signInURL = try #require(me.json["sign_in_url"] as? String, "\(name)")
            try await Self.followAndSignIn(stack, signInURL: signInURL, expectedClaims: try Self.withCapabilities(claims, ["cp1"]), name)

            let relayed = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id])
            #expect(relayed.status == 200, "\(name): \(relayed.text)")
            let silent = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "claims": claims])
            #expect(silent.status == 200, "\(name): \(silent.text)")
        }
    }
}
