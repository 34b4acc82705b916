import Foundation
import IdentityCore
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

/// behaviour §12 Problems: the STS's answer surfaced whole in the problem.
@Suite("Problems from STS failures")
struct ProblemFromSTSFailureTests {
    static func failure(_ status: Int, _ body: String, headers: [(String, String)] = []) -> STSFailure {
        STSErrorMapping.classify(status: status, headers: headers, body: Array(body.utf8), now: Date(timeIntervalSince1970: 1_790_000_000))
    }

    static func rendered(_ problem: RelayError) throws -> [String: Any] {
        let response = problem.response(correlationId: "c-1")
        return try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
    }

    @Test("A consent problem lists the scopes, keeps the account active and may be replayed")
    func consent() throws {
        let failure = Self.failure(
            400,
            #"{"error":"invalid_grant","error_description":"AADSTS65001: No consent. Trace ID: t-1 Correlation ID: c-2","error_codes":[65001],"suberror":"consent_required","trace_id":"t-1","correlation_id":"c-2"}"#
        )
        let problem = RelayError(failure, requestedScopes: ScopeSet(normalizing: ["https://graph.microsoft.com/Mail.Read", "Calendars.ReadWrite"]))
        #expect(problem.replayable)
        let json = try Self.rendered(problem)
        #expect(json["type"] as? String == "urn:tokenrelay:problem:interaction_required")
        #expect(json["status"] as? Int == 409)
        #expect(json["sts_error_codes"] as? [Int] == [65001])
        #expect(json["suberror"] as? String == "consent_required")
        #expect(json["sts_trace_id"] as? String == "t-1")
        #expect(json["sts_correlation_id"] as? String == "c-2")
        #expect(json["scopes"] as? [String] == ["Calendars.ReadWrite", "Mail.Read"])
        #expect(json["account_state"] as? String == "active")
    }

    @Test("A dead refresh token says so; it is not replayed from memory (the account state is durable)")
    func dead() throws {
        let problem = RelayError(Self.failure(400, #"{"error":"invalid_grant","error_codes":[700082],"suberror":"bad_token"}"#))
        #expect(!problem.replayable)
        let json = try Self.rendered(problem)
        #expect(json["account_state"] as? String == "interaction_required")
        #expect(json["scopes"] == nil)
    }

    @Test("No suberror sent: none answered; claims arrive decoded")
    func noSuberrorAndClaims() throws {
        let claims = #"{"access_token":{"acrs":{"essential":true,"value":"c1"}}}"#
        let problem = RelayError(
            Self.failure(400, #"{"error":"interaction_required","claims":"\#(Data(claims.utf8).base64EncodedString())"}"#))
        let json = try Self.rendered(problem)
        #expect(json["suberror"] == nil)
        #expect(json["claims"] as? String == claims)
        #expect(problem.replayable)
    }

    @Test("A transient answer keeps its codes and carries Retry-After")
    func transient() throws {
        let failure = Self.failure(
            503, #"{"error":"temporarily_unavailable","error_codes":[90033]}"#, headers: [("Retry-After", "7")])
        let problem = RelayError(failure)
        #expect(problem.headers["Retry-After"] == "7")
        let json = try Self.rendered(problem)
        #expect(json["error"] as? String == "upstream_unavailable")
        #expect(json["retry_after_s"] as? Int == 7)
        #expect(json["sts_error_codes"] as? [Int] == [90033])
        #expect(!problem.replayable)
    }
}
