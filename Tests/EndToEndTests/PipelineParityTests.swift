import Foundation
import HTTPClientBridge
import HTTPCommon
import Testing
import TokenRelayTesting

/// One request pipeline (ADR 0013): a request answered on the server thread and the same request
/// answered after suspension must get the same answer. A key's first use is not in memory (the
/// store is asked, so the request is suspended); its second use is (answered on the server
/// thread when memory can). The relay's request log names the step that answered.
@Suite("One request pipeline", .serialized)
struct PipelineParityTests {
    struct Case: Sendable, CustomStringConvertible {
        let name: String
        let body: [UInt8]
        var contentType = "application/json"
        var description: String { name }
    }

    /// Every malformed-body case the suite knows (JSONBodyTests, CachedPathTests,
    /// CorrelationIdTests, InputValidationTests), in the usual shape for `account` where it matters.
    static func cases(account: String) -> [Case] {
        func json(_ text: String) -> [UInt8] { Array(text.utf8) }
        let manyScopes = "[" + (0..<1000).map { "\"S\($0)\"" }.joined(separator: ",") + "]"
        return [
            Case(name: "duplicate account_id, last known", body: json(#"{"account_id":"acc_nope","account_id":"\#(account)","scopes":["User.Read"]}"#)),
            Case(name: "duplicate account_id, last unknown", body: json(#"{"account_id":"\#(account)","account_id":"acc_nope","scopes":["User.Read"]}"#)),
            Case(name: "duplicate scopes, last wrong type", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"],"scopes":"User.Read"}"#)),
            Case(name: "duplicate scopes, same value", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"],"scopes":["User.Read"]}"#)),
            Case(
                name: "duplicate inside claims",
                body: json(#"{"account_id":"\#(account)","scopes":["User.Read"],"claims":{"access_token":{},"access_token":{}}}"#)),
            Case(name: "account_id a number", body: json(#"{"account_id":7,"scopes":["User.Read"]}"#)),
            Case(name: "scopes a string", body: json(#"{"account_id":"\#(account)","scopes":"User.Read"}"#)),
            Case(name: "scopes of numbers", body: json(#"{"account_id":"\#(account)","scopes":[1]}"#)),
            Case(name: "force_refresh a string", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"],"force_refresh":"yes"}"#)),
            Case(name: "force_refresh a number", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"],"force_refresh":1}"#)),
            Case(name: "min_ttl_s negative", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"],"min_ttl_s":-1}"#)),
            Case(name: "min_ttl_s fractional", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"],"min_ttl_s":1.5}"#)),
            Case(name: "min_ttl_s too long", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"],"min_ttl_s":86401}"#)),
            Case(name: "unknown member", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"],"extra":1}"#)),
            Case(name: "two selectors", body: json(#"{"account_id":"\#(account)","username":"u","scopes":["User.Read"]}"#)),
            Case(name: "tenant_id without username", body: json(#"{"account_id":"\#(account)","tenant_id":"t","scopes":["User.Read"]}"#)),
            Case(name: "no scopes", body: json(#"{"account_id":"\#(account)"}"#)),
            Case(name: "no selector", body: json(#"{"scopes":["User.Read"]}"#)),
            Case(name: "empty account_id", body: json(#"{"account_id":"","scopes":["User.Read"]}"#)),
            Case(name: "scopes and resource", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"],"resource":"https://graph.microsoft.com"}"#)),
            Case(name: "only OIDC scopes", body: json(#"{"account_id":"\#(account)","scopes":["openid"]}"#)),
            Case(name: "empty scopes", body: json(#"{"account_id":"\#(account)","scopes":[]}"#)),
            Case(name: "blank scope", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"," "]}"#)),
            Case(name: "two resources", body: json(#"{"account_id":"\#(account)","scopes":["User.Read","https://vault.azure.net/x"]}"#)),
            Case(name: "a thousand scopes", body: json(#"{"account_id":"\#(account)","scopes":\#(manyScopes)}"#)),
            Case(name: "unknown authority", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"],"authority":"https://evil.example/x"}"#)),
            Case(name: "claims a number", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"],"claims":3}"#)),
            Case(name: "correlation_id a number", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"],"correlation_id":7}"#)),
            Case(name: "correlation_id with CRLF", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"],"correlation_id":"a\r\nX-Injected: 1"}"#)),
            Case(name: "correlation_id with a tab", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"],"correlation_id":"tab\there"}"#)),
            Case(
                name: "correlation_id too long",
                body: json(#"{"account_id":"\#(account)","scopes":["User.Read"],"correlation_id":"\#(String(repeating: "c", count: 5000))"}"#)),
            Case(
                name: "correlation_id fine, min_ttl_s not",
                body: json(#"{"account_id":"\#(account)","scopes":["User.Read"],"correlation_id":"c-1","min_ttl_s":-1}"#)),
            Case(name: "NUL in account_id", body: json(#"{"account_id":"acc\u0000x","scopes":["User.Read"]}"#)),
            Case(name: "empty body", body: []),
            Case(name: "array body", body: json("[1]")),
            Case(name: "number body", body: json("3")),
            Case(name: "truncated", body: json("{")),
            Case(name: "trailing garbage", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"]} x"#)),
            Case(name: "invalid UTF-8", body: json(#"{"account_id":""#) + [0xFF] + json(#"","scopes":["User.Read"]}"#)),
            Case(name: "lone surrogate", body: json(#"{"account_id":"\ud800","scopes":["User.Read"]}"#)),
            Case(name: "text/plain", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"]}"#), contentType: "text/plain"),
            Case(name: "no JSON suffix", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"]}"#), contentType: "application/jsonx"),
            Case(name: "+json media type", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"]}"#), contentType: "application/problem+json"),
            Case(name: "unknown account", body: json(#"{"account_id":"acc_missing","scopes":["User.Read"]}"#)),
            Case(name: "valid and cached", body: json(#"{"account_id":"\#(account)","scopes":["User.Read"]}"#)),
        ]
    }

    /// A stored `tokens:acquire` key written straight into the database, so the relay has never
    /// seen it: its first use is looked up in the store. Its creation is notified as the CLI's
    /// is (`api_key.created`), or the relay's key directory would refuse the id it does not hold.
    static func storedKey(_ stack: TokenRelayStack, _ index: Int) async throws -> String {
        let keyId = "parity\(index)x\(UUID().uuidString.prefix(8).lowercased())"
        let secret = UUID().uuidString.replacingOccurrences(of: "-", with: "")
        let before = try await createdNotifications(stack)
        try await stack.withDatabase { connection in
            _ = try connection.query(
                "INSERT INTO api_keys (key_id, name, secret_hash, permissions) VALUES ($1, 'parity', sha256(convert_to($2, 'UTF8')), '{tokens:acquire}')",
                [.text(keyId), .text(secret)])
            _ = try connection.query("SELECT pg_notify('tokenrelay_invalidation', $1)", [.text("api_key.created:\(keyId) parity-test")])
        }
        // Used once the notification arrived (a moment later), without a request that would put
        // the key in memory before its first use.
        let started = ContinuousClock.now
        while try await createdNotifications(stack) <= before, started.duration(to: .now) < .seconds(2) {
            try await Task.sleep(for: .milliseconds(10))
        }
        return "trk_\(keyId)_\(secret)"
    }

    /// `tokenrelay_invalidations_received_total{kind="api_key.created"}` of the relay.
    static func createdNotifications(_ stack: TokenRelayStack) async throws -> Int {
        let metrics = try await stack.request("GET", "/metrics", authenticated: false).text
        let prefix = #"tokenrelay_invalidations_received_total{kind="api_key.created"} "#
        return metrics.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Int($0.dropFirst(prefix.count)) } ?? 0
    }

    static func send(_ stack: TokenRelayStack, _ body: [UInt8], contentType: String, key: String, path: String = "/v1/tokens/silent") async throws
        -> (TestResponse, String)
    {
        let id = "parity-" + UUID().uuidString.lowercased()
        let headers: HTTPHeaders = ["Authorization": "Bearer \(key)", "Content-Type": contentType, "client-request-id": id]
        let response = try await stack.http.execute(HTTPClientRequest(method: "POST", url: stack.baseURL + path, headers: headers, body: body, timeout: 30))
        return (TestResponse(response), id)
    }

    /// The answer without what names the request (its correlation id) or the token's own bytes.
    static func comparable(_ response: TestResponse) -> [String: String] {
        var fields = ["status": String(response.status)]
        for name in ["Content-Type", "WWW-Authenticate", "Retry-After", "Allow"] { fields[name] = response.headers[name] }
        guard response.status != 200 else { return fields }
        var object = (try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]) ?? ["unparsed": response.text]
        object["correlation_id"] = nil
        if let sorted = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) { fields["body"] = String(decoding: sorted, as: UTF8.self) }
        return fields
    }

    /// The step the relay's request log names for the request `id`.
    static func step(_ stack: TokenRelayStack, _ id: String) -> String? {
        let line = stack.relay.log().split(separator: "\n").last { $0.contains("\"request.completed\"") && $0.contains(id) }
        guard let line, let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
        return object["request.step"] as? String
    }

    @Test("Every malformed body gets the same status and problem on the server thread and after suspension")
    func sameAnswerOnBothSteps() async throws {
        let stack = try await TokenRelayStack(name: "e2e_pipeline_parity")
        defer { stack.stop() }
        let account = try await stack.signInAccountId()
        let warm = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": account, "scopes": ["User.Read"]])
        #expect(warm.status == 200)
        var serverThreadAnswers = 0
        for (index, item) in Self.cases(account: account).enumerated() {
            let key = try await Self.storedKey(stack, index)
            let (suspended, suspendedId) = try await Self.send(stack, item.body, contentType: item.contentType, key: key)
            let (immediate, immediateId) = try await Self.send(stack, item.body, contentType: item.contentType, key: key)
            #expect(Self.comparable(suspended) == Self.comparable(immediate), "\(item): \(suspended.text) vs \(immediate.text)")
            #expect(suspended.status != 500, "\(item)")
            // The first use had to ask the store; the second, in memory, is answered on the server
            // thread unless the answer needs the store or the STS (an unknown account, NUL).
            try await Task.sleep(for: .milliseconds(20))
            #expect(Self.step(stack, suspendedId) == "suspended", "\(item)")
            if Self.step(stack, immediateId) == "server_thread" { serverThreadAnswers += 1 }
        }
        // Everything but the answers that need the store went through the server-thread step.
        #expect(serverThreadAnswers >= Self.cases(account: account).count - 4, "\(serverThreadAnswers)")
    }

    @Test("A refused API key is refused alike by memory and by the store")
    func refusedKeysAgree() async throws {
        let stack = try await TokenRelayStack(name: "e2e_pipeline_keys")
        defer { stack.stop() }
        let body = Array(#"{"account_id":"acc_x","scopes":["User.Read"]}"#.utf8)
        let known = try await Self.storedKey(stack, 99)
        let wrongSecret = known + "x"
        for key in ["trk_neverseenkey_secret", wrongSecret] {
            let (first, firstId) = try await Self.send(stack, body, contentType: "application/json", key: key)
            let (second, secondId) = try await Self.send(stack, body, contentType: "application/json", key: key)
            #expect(first.status == 401 && Self.comparable(first) == Self.comparable(second), "\(first.text) vs \(second.text)")
            try await Task.sleep(for: .milliseconds(20))
            // A key id no key has is refused from memory at once (the key directory, behaviour
            // §7.1); a known id with a wrong secret asks the store the first time.
            #expect(Self.step(stack, firstId) == (key == wrongSecret ? "suspended" : "server_thread"), "\(key)")
            #expect(Self.step(stack, secondId) == "server_thread")
        }
    }

    @Test("A member named twice is 400 naming it, on both steps and on other JSON routes (behaviour §4.5)")
    func duplicateMembersNamed() async throws {
        let stack = try await TokenRelayStack(name: "e2e_pipeline_duplicates")
        defer { stack.stop() }
        let account = try await stack.signInAccountId()
        _ = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": account, "scopes": ["User.Read"]])
        let silent: [(String, String)] = [
            (#"{"account_id":"\#(account)","scopes":["User.Read"],"scopes":["User.Read"]}"#, "scopes"),
            (#"{"account_id":"acc_first","account_id":"\#(account)","scopes":["User.Read"]}"#, "account_id"),
            (#"{"account_id":"\#(account)","scopes":["User.Read"],"claims":{"access_token":{"xms_cc":{}},"access_token":{}}}"#, "claims.access_token"),
        ]
        let key = try await Self.storedKey(stack, 1)
        for (body, member) in silent {
            for _ in 0..<2 {  // suspended (the key is new), then on the server thread
                let (response, _) = try await Self.send(stack, Array(body.utf8), contentType: "application/json", key: key)
                #expect(response.status == 400 && response.json["field"] as? String == member, "\(body): \(response.text)")
                #expect(response.json["error"] as? String == "invalid_request", "\(response.text)")
            }
        }
        // A route answered only after suspension reads bodies with the same reader.
        let signIn = try await Self.send(
            stack, Array(#"{"scopes":["User.Read"],"scopes":["Mail.Read"]}"#.utf8), contentType: "application/json",
            key: stack.apiKey, path: "/v1/sign-ins"
        ).0
        #expect(signIn.status == 400 && signIn.json["field"] as? String == "scopes", "\(signIn.text)")
    }
}
