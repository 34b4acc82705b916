import Foundation
import HTTPCommon
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

/// A problem's body is written member by member (behaviour §4, §10); it must be the bytes the
/// general writer gives for the same members as one JSON object.
@Suite("Problem bodies")
struct ProblemBodyTests {
    /// What `RelayError.response` wrote before: the members as a dictionary through `JSONWriter`.
    static func asObject(_ problem: RelayError, correlationId: String) -> [UInt8] {
        var members = problem.extensions
        members["type"] = .string(problem.code.typeURI)
        members["title"] = .string(problem.code.title)
        members["status"] = .number(Double(problem.status))
        members["detail"] = .string(problem.detail)
        members["error"] = .string(problem.code.rawValue)
        members["correlation_id"] = .string(correlationId)
        return JSONWriter.encode(.object(members))
    }

    static let extensionSets: [[String: JSONValue]] = [
        [:],
        ["field": .string("scopes")],
        // Keys before, between and after the standard ones, nested values, a non-ASCII key.
        [
            "a": .number(1), "claims": .object(["z": .null, "b": .array([.bool(true), .string("q\"uote")])]), "retry_after_s": .number(30),
            "zz": .string("last"), "é": .string("ü"),
        ],
        [
            "sts_error_codes": .array([.number(50076), .number(50079)]), "suberror": .string("basic_action"),
            "sign_in_url": .string("https://relay.example/v1/sign-ins/s/abc"),
        ],
        // An extension named like a standard member loses to it.
        ["status": .number(999), "error": .string("spoofed"), "type": .string("urn:other"), "field": .string("x")],
    ]

    @Test("Written member by member, the body is byte for byte the object JSONWriter writes", arguments: extensionSets.indices)
    func sameBytes(index: Int) throws {
        let problem = RelayError(.invalidRequest, "A \"quoted\" detail\nover two lines.", extensions: Self.extensionSets[index])
        let body = problem.body(correlationId: "corr-\(index)")
        #expect(body == Self.asObject(problem, correlationId: "corr-\(index)"))
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        #expect(parsed["status"] as? Int == 400)
        #expect(parsed["error"] as? String == "invalid_request")
        #expect(parsed["correlation_id"] as? String == "corr-\(index)")
    }

    @Test("A non-finite number in an extension gives {} as the general writer does")
    func nonFinite() {
        let problem = RelayError(.internal, "x", extensions: ["bad": .number(.nan)])
        #expect(problem.body(correlationId: "c") == Array("{}".utf8))
        #expect(Self.asObject(problem, correlationId: "c") == Array("{}".utf8))
    }
}
