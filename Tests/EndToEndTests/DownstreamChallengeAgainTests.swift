import Foundation
import HTTPClientBridge
import Testing
import TokenRelayTesting

/// Downstream claims challenges end in a sign-in, never in a loop or a raw 401 (behaviour §6, §12
/// Downstream; issue 10 item 3; identity platform "Claims challenges, claims requests, and client
/// capabilities"; cases 18 and 19): after the one re-acquisition with the API's claims, a second
/// challenge is 409 `interaction_required` with the API's `claims`, a `sign_in_url` carrying them
/// and the API's `WWW-Authenticate`; the access tokens the API refused are never served again,
/// on any replica.
@Suite("A downstream API that challenges again gets the caller a sign-in, not a raw 401", .serialized)
struct DownstreamChallengeAgainTests {
    static let alice = "alice@contoso.example"
    /// Case 18's claims.
    static let nbf = #"{"access_token":{"nbf":{"essential":true, "value":"1657834417"}}}"#
    /// Case 19's claims.
    static let caeError = #"{"access_token":{"nbf":{"essential":true,"value":"1726077595"},"xms_caeerror":{"value":"10012"}}}"#

    static func object(_ text: String?) -> NSDictionary? {
        guard let text else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? NSDictionary
    }

    static func silentToken(_ stack: TokenRelayStack, _ id: String, on base: String? = nil) async throws -> TestResponse {
        try await stack.request("POST", (base ?? stack.baseURL) + "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
    }

    /// The 409 of a second challenge: claims, WWW-Authenticate, a sign_in_url whose authorize
    /// request carries the claims with xms_cc.
    static func expectChallengeProblem(_ stack: TokenRelayStack, _ answer: TestResponse, claims: String, _ label: String) async throws {
        #expect(answer.status == 409, "\(label): \(answer.status) \(answer.text)")
        #expect(answer.json["error"] as? String == "interaction_required", "\(label)")
        #expect(answer.headers["TokenRelay-Relayed"] == nil, "\(label): a problem, not the relayed 401")
        #expect(Self.object(answer.json["claims"] as? String) == Self.object(claims), "\(label): \(answer.text)")
        let challenge = answer.headers["WWW-Authenticate"] ?? ""
        #expect(challenge.contains(#"error="insufficient_claims""#), "\(label): \(challenge)")
        let signInURL = try #require(answer.json["sign_in_url"] as? String, "\(label)")
        let start = try await stack.request("GET", signInURL, authenticated: false)
        #expect(start.status == 302, "\(label): \(start.text)")
        let items = URLComponents(string: start.headers["Location"] ?? "")?.queryItems ?? []
        let sent = Self.object(items.first { $0.name == "claims" }?.value)
        let access = sent?["access_token"] as? NSDictionary
        let expected = Self.object(claims)?["access_token"] as? NSDictionary ?? [:]
        for key in expected.allKeys { #expect(access?[key] as? NSDictionary == expected[key] as? NSDictionary, "\(label): \(String(describing: sent))") }
        #expect(access?["xms_cc"] as? NSDictionary == ["values": ["cp1"]], "\(label): \(String(describing: sent))")
    }

    @Test(
        "Cases 18 and 19: the API challenges the re-acquired token again: 409 with the claims, WWW-Authenticate and sign_in_url; no loop; neither refused token is served again"
    )
    func secondChallengeIsInteractionRequired() async throws {
        let stack = try await TokenRelayStack(name: "e2e_downstream_again", environment: ["TOKENRELAY_CLIENT_CAPABILITIES": "cp1"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        for (name, claims) in [("18", Self.nbf), ("19", Self.caeError)] {
            let cached = try await Self.silentToken(stack, id)
            let refusedFirst = try #require(cached.json["access_token"] as? String)
            let issuedBefore = try await stack.issuedSecrets().accessTokens
            _ = try await stack.control(
                "POST", "/_control/faults", json: ["endpoint": "graph", "username": Self.alice, "claims_challenge": claims, "count": 2])
            let graphBefore = try await stack.emulatorCount("graph_requests")
            let me = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id])
            try await Self.expectChallengeProblem(stack, me, claims: claims, "case \(name)")
            #expect(try await stack.emulatorCount("graph_requests") == graphBefore + 2, "case \(name): one retry, never a loop")
            let refusedSecond = try await stack.issuedSecrets().accessTokens.filter { !issuedBefore.contains($0) }
            #expect(refusedSecond.count == 1, "case \(name): one re-acquisition")

            let next = try await Self.silentToken(stack, id)
            #expect(next.status == 200, "case \(name): \(next.text)")
            let served = try #require(next.json["access_token"] as? String)
            #expect(served != refusedFirst, "case \(name): the first refused token was served again")
            #expect(!refusedSecond.contains(served), "case \(name): the re-acquired, refused token was served again")
        }
    }

    @Test("Two replicas: after replica A evicts the token the API refused, replica B does not serve it either (the re-acquisition needs interaction)")
    func refusedTokenLeavesEveryReplica() async throws {
        // A memory TTL far above the bound: only a notification can explain B's answer.
        let stack = try await TokenRelayStack(
            name: "e2e_downstream_evict_replicas", environment: ["TOKENRELAY_CLIENT_CAPABILITIES": "cp1", "TOKENRELAY_CACHE_TTL_S": "600"])
        defer { stack.stop() }
        let replica = try await stack.startReplica()
        defer { replica.stop() }
        let id = try await stack.signInAccountId()
        // Replica B holds the token in its memory.
        for _ in 0..<2 {
            let warm = try await Self.silentToken(stack, id, on: replica.baseURL)
            #expect(warm.status == 200 && warm.json["source"] as? String == "cache", "\(warm.text)")
        }
        let refused = try #require(try await Self.silentToken(stack, id, on: replica.baseURL).json["access_token"] as? String)

        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "graph", "username": Self.alice, "claims_challenge": Self.nbf])
        _ = try await stack.control(
            "POST", "/_control/faults", json: ["endpoint": "token", "username": Self.alice, "error": "interaction_required", "error_codes": [50079]])
        let me = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": id])
        try await Self.expectChallengeProblem(stack, me, claims: Self.nbf, "re-acquisition needs interaction")

        // Within the 2 s of behaviour §12, replica B stops serving the refused token.
        var served = refused
        let until = Date().addingTimeInterval(2.5)
        while Date() < until {
            let answer = try await Self.silentToken(stack, id, on: replica.baseURL)
            #expect(answer.status == 200, "\(answer.text)")
            served = answer.json["access_token"] as? String ?? refused
            if served != refused { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(served != refused, "replica B still serves the token the API refused on replica A")
        let onA = try await Self.silentToken(stack, id)
        #expect(onA.json["access_token"] as? String != refused, "\(onA.text)")
    }
}
