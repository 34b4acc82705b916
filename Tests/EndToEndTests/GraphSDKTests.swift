import Foundation
import Testing
import TokenRelayTesting

/// Microsoft's Graph SDK for Python (`msgraph-sdk`, pinned in scripts/python-tools) through
/// `/v1/downstream/graph` (issue 12 part 3; behaviour §6, §6.7): Tests/GraphSDK/relay_graph_client.py
/// runs one case per call against a real stack (PostgreSQL, the emulator, `token-relay serve`),
/// and the assertions here read its JSON output and the emulator's own record of what reached
/// Graph. `make test` sets TOKENRELAY_TEST_PYTHON_BIN.
@Suite("Microsoft Graph SDK for Python through the relay", .serialized, .timingGroup(.heavy))
struct GraphSDKTests {
    static let alice = "alice@contoso.example"

    /// Runs `relay_graph_client.py case`; returns its JSON output.
    static func run(_ stack: TokenRelayStack, accountId: String, _ name: String) async throws -> [String: Any] {
        let bin = try #require(
            ProcessInfo.processInfo.environment["TOKENRELAY_TEST_PYTHON_BIN"],
            "set TOKENRELAY_TEST_PYTHON_BIN to the bin directory printed by scripts/python-tools (make test does)")
        let script = BuiltProducts.packageRoot() + "/Tests/GraphSDK/relay_graph_client.py"
        let (status, output) = try await GeneratedClientTests.run(
            bin + "/python", [script, name], environment: ["TR_BASE_URL": stack.baseURL, "TR_API_KEY": stack.apiKey, "TR_ACCOUNT_ID": accountId])
        #expect(status == 0, "\(name): \(output)")
        #expect(!output.contains(stack.apiKey), "\(name): the script printed the API key")
        let line = output.split(separator: "\n").last.map(String.init) ?? ""
        return try #require((try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any], "\(name): \(output)")
    }

    /// The emulator's record of the Graph requests it answered (`GET /_control/graph-requests`).
    static func graphRequests(_ stack: TokenRelayStack) async throws -> [[String: Any]] {
        try await stack.control("GET", "/_control/graph-requests").json["requests"] as? [[String: Any]] ?? []
    }

    static func withStack(_ name: String, _ body: (TokenRelayStack, String) async throws -> Void) async throws {
        let stack = try await TokenRelayStack(name: name, environment: ["TOKENRELAY_CLIENT_CAPABILITIES": "cp1"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId(alice)
        try await body(stack, id)
    }

    @Test("GET me: the SDK parses the user Graph answered through the relay")
    func me() async throws {
        try await Self.withStack("e2e_graph_sdk_me") { stack, id in
            let out = try await Self.run(stack, accountId: id, "me")
            #expect(out["user_principal_name"] as? String == Self.alice)
            #expect((out["id"] as? String)?.isEmpty == false)
            let requests = try await Self.graphRequests(stack)
            #expect(requests.map { $0["path"] as? String } == ["/v1.0/me"])
            #expect(requests.allSatisfy { $0["token_verified"] as? Bool == true })
        }
    }

    @Test("examples/graph_sdk.py runs as it is, and the README's snippet is that file's code")
    func exampleFile() async throws {
        let root = BuiltProducts.packageRoot()
        let example = try String(contentsOfFile: root + "/examples/graph_sdk.py", encoding: .utf8)
        let readme = try String(contentsOfFile: root + "/README.md", encoding: .utf8)
        let section = try #require(readme.components(separatedBy: "## Microsoft Graph SDK for Python").dropFirst().first)
        let snippet = try #require(section.components(separatedBy: "```python\n").dropFirst().first?.components(separatedBy: "```").first)
        let lines = Set(example.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
        for line in snippet.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) where !line.isEmpty {
            #expect(lines.contains(line), "the README's line is not in examples/graph_sdk.py: \(line)")
        }
        try await Self.withStack("e2e_graph_sdk_example") { stack, id in
            for n in 1...12 {
                let created = try await stack.request("POST", "/v1/downstream/graph/me/messages", json: ["subject": "m\(n)"], headers: ["X-Account-Id": id])
                #expect(created.status == 201, "\(created.text)")
            }
            let bin = try #require(ProcessInfo.processInfo.environment["TOKENRELAY_TEST_PYTHON_BIN"], "make test sets TOKENRELAY_TEST_PYTHON_BIN")
            let (status, output) = try await GeneratedClientTests.run(
                bin + "/python", [root + "/examples/graph_sdk.py"],
                environment: ["TR_BASE_URL": stack.baseURL, "TR_API_KEY": stack.apiKey, "TR_ACCOUNT_ID": id])
            #expect(status == 0, "\(output)")
            #expect(output.contains("signed in: \(Self.alice)\n"), "\(output)")
            let subjects = output.split(separator: "\n").filter { $0.hasPrefix("message: ") }.map { String($0.dropFirst("message: ".count)) }
            #expect(subjects == (1...12).map { "m\($0)" }, "two pages of Graph's default 10, through the relay: \(output)")
        }
    }

    @Test(
        "Paging: Graph's absolute @odata.nextLink comes back pointing at the relay, and the SDK's PageIterator fetches every page through it with the relay's token"
    )
    func paging() async throws {
        try await Self.withStack("e2e_graph_sdk_paging") { stack, id in
            for n in 1...5 {
                let created = try await stack.request(
                    "POST", "/v1/downstream/graph/me/messages", json: ["subject": "m\(n)"], headers: ["X-Account-Id": id])
                #expect(created.status == 201, "\(created.text)")
            }
            let before = try await Self.graphRequests(stack).count
            let out = try await Self.run(stack, accountId: id, "paging")
            #expect(out["subjects"] as? [String] == ["m1", "m2", "m3", "m4", "m5"])
            #expect(out["first_next_link"] as? String == stack.baseURL + "/v1/downstream/graph/me/messages?%24top=2&%24skip=2")

            let pages = try await Self.graphRequests(stack).dropFirst(before)
            #expect(pages.count == 3, "three pages, each one request to Graph: \(pages)")
            #expect(pages.map { ($0["query"] as? [String: String])?["$skip"] } == [nil, "2", "4"])
            #expect(pages.allSatisfy { $0["path"] as? String == "/v1.0/me/messages" && $0["token_verified"] as? Bool == true })
        }
    }

    @Test("POST sendMail: 202 relayed, the SDK returns None, Graph counts one mail")
    func sendMail() async throws {
        try await Self.withStack("e2e_graph_sdk_send_mail") { stack, id in
            let out = try await Self.run(stack, accountId: id, "send_mail")
            #expect(out["sent"] as? Bool == true)
            #expect(out["result"] is NSNull)
            #expect(try await stack.emulatorCount("sent_mail") == 1)
            let requests = try await Self.graphRequests(stack)
            #expect(requests.map { "\($0["method"] ?? "") \($0["path"] ?? "")" } == ["POST /v1.0/me/sendMail"], "not retried, not doubled")
        }
    }

    @Test("$batch: one POST through the relay per batch; sub-requests carry relative URLs and each comes back with its status and body")
    func batch() async throws {
        try await Self.withStack("e2e_graph_sdk_batch") { stack, id in
            let created = try await stack.request("POST", "/v1/downstream/graph/me/messages", json: ["subject": "one"], headers: ["X-Account-Id": id])
            #expect(created.status == 201)
            let before = try await Self.graphRequests(stack).count
            let out = try await Self.run(stack, accountId: id, "batch")
            #expect(out["statuses"] as? [String: Int] == ["me": 200, "messages": 200], "\(out)")
            #expect(out["urls"] as? [String] == ["/me", "/me/messages?%24top=1"], "\(out)")
            #expect(out["user_principal_name"] as? String == Self.alice, "\(out)")
            #expect(out["message_subjects"] as? [String] == ["one"], "\(out)")
            // The SDK's batch, then the same batch read as raw bytes: each one POST and its two sub-requests.
            let requests = try await Self.graphRequests(stack).dropFirst(before)
            let once = ["POST /v1.0/$batch", "GET /v1.0/me", "GET /v1.0/me/messages"]
            #expect(requests.map { "\($0["method"] ?? "") \($0["path"] ?? "")" } == once + once)
            #expect(requests.allSatisfy { $0["token_verified"] as? Bool == true })
        }
    }

    @Test(
        "CAE: Graph challenges the token and the one re-acquired with its claims; the SDK raises an APIError with status 409 and the interaction_required problem"
    )
    func caeChallenge() async throws {
        try await Self.withStack("e2e_graph_sdk_cae") { stack, id in
            // Case 18's claims, twice: the first token and the one acquired with the claims.
            let claims = #"{"access_token":{"nbf":{"essential":true, "value":"1657834417"}}}"#
            _ = try await stack.control(
                "POST", "/_control/faults", json: ["endpoint": "graph", "username": Self.alice, "claims_challenge": claims, "count": 2])
            let out = try await Self.run(stack, accountId: id, "cae")
            #expect(out["is_api_error"] as? Bool == true, "\(out)")
            #expect(out["status"] as? Int == 409, "\(out)")
            let problem = out["problem"] as? [String: Any] ?? [:]
            #expect(problem["status"] as? Int == 409, "\(out)")
            #expect(problem["type"] as? String == "urn:tokenrelay:problem:interaction_required", "\(out)")
            #expect((problem["sign_in_url"] as? String)?.hasPrefix(stack.baseURL + "/v1/sign-ins/start") == true, "\(out)")
            let sent = (problem["claims"] as? String).flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) } as? NSDictionary
            #expect(sent == (try JSONSerialization.jsonObject(with: Data(claims.utf8)) as? NSDictionary), "\(out)")
            #expect((out["www_authenticate"] as? String)?.contains(#"error="insufficient_claims""#) == true, "\(out)")
            #expect(try await Self.graphRequests(stack).count == 2, "one retry with the claims, never a loop")
        }
    }
}
