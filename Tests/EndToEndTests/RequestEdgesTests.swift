import Foundation
import Testing
import TokenRelayTesting

/// behaviour §7.4 through the real binary over raw sockets: what a request target, its singleton
/// headers and its body coding may be, each refused with a 400 (or 415) problem naming what is
/// wrong, where each was answered otherwise before (found by a new-user try).
@Suite("Strict at the edges: request targets, headers and body codings", .serialized)
struct RequestEdgesTests {
    typealias Framing = FramingTests

    /// One request on a fresh connection: its status line, `error` and `field`, and the answer.
    static func answer(_ port: Int, _ head: String, body: String = "") async throws -> (status: String?, error: String?, field: String?, text: String) {
        let (text, _) = try await Framing.exchange(port, head + "\r\n" + body, within: 2)
        return (Framing.statuses(text).first, Framing.error(text), Framing.field(text), text)
    }

    @Test("A '#' or a byte outside ASCII in the target is 400; query pieces that carry nothing do not count toward the 100 parameters")
    func requestTargets() async throws {
        let stack = try await TokenRelayStack(name: "e2e_edges_target")
        defer { stack.stop() }
        let port = try ConnectionLimitsTests.port(stack)
        let auth = "Host: x\r\nAuthorization: Bearer \(stack.apiKey)\r\n"
        // A fragment is never sent (RFC 9110 §7.1); raw non-ASCII must be percent-encoded (RFC 3986 §2). Each was 404 or 200.
        for target in ["/healthz#x", "/v1/accounts#", "/v1/accounts?limit=1#top", "/v1/accounts/é", "/v1/accounts?username=é", "/healthz?x=\u{80}"] {
            let answer = try await Self.answer(port, "GET \(target) HTTP/1.1\r\n\(auth)")
            #expect(answer.status == "HTTP/1.1 400" && answer.error == "invalid_request", "\(target): \(answer.text)")
            #expect(answer.text.lowercased().contains("content-type: application/problem+json"), "\(target): \(answer.text)")
        }
        #expect(try await Self.answer(port, "GET /v1/accounts/%C3%A9 HTTP/1.1\r\n\(auth)").status == "HTTP/1.1 404")

        // Empty pieces and `=` alone are ignored (behaviour §7.4), so they are not parameters: 300 of them were 414.
        for query in [String(repeating: "&", count: 300) + "limit=1", String(repeating: "=&", count: 300) + "limit=1", String(repeating: "&", count: 7000)] {
            let answer = try await Self.answer(port, "GET /v1/accounts?\(query) HTTP/1.1\r\n\(auth)")
            #expect(answer.status == "HTTP/1.1 200", "\(query.prefix(20))…: \(answer.text.prefix(300))")
        }
        // Those that carry something still count: 100 named among 300 empty are read (the first unknown named), 101 are 414.
        func named(_ count: Int) -> String { (0..<count).map { "p\($0)=1" }.joined(separator: "&&&&") }
        let hundred = try await Self.answer(port, "GET /v1/accounts?&&\(named(100))&& HTTP/1.1\r\n\(auth)")
        #expect(hundred.status == "HTTP/1.1 400" && hundred.field == "p0", "\(hundred.text.prefix(300))")
        #expect(try await Self.answer(port, "GET /v1/accounts?\(named(101)) HTTP/1.1\r\n\(auth)").status == "HTTP/1.1 414")
        // The downstream relay passes the pieces that carry something.
        let id = try await stack.signInAccountId()
        let relayed = try await Self.answer(port, "GET /v1/downstream/graph/me?&&$select=displayName&&& HTTP/1.1\r\n\(auth)X-Account-Id: \(id)\r\n")
        #expect(relayed.status == "HTTP/1.1 200", "\(relayed.text.prefix(300))")
    }

    @Test(
        "A correlation header sent twice, a control character in a forwarded header, a body in a content coding are refused naming the header; a long unknown name is quoted shortened"
    )
    func headersAndBodies() async throws {
        let stack = try await TokenRelayStack(name: "e2e_edges_headers")
        defer { stack.stop() }
        let port = try ConnectionLimitsTests.port(stack)
        let auth = "Host: x\r\nAuthorization: Bearer \(stack.apiKey)\r\n"
        // One correlation id per request, like the other singleton headers; the first was taken.
        for name in ["client-request-id", "X-Correlation-ID"] {
            let answer = try await Self.answer(port, "GET /v1/accounts HTTP/1.1\r\n\(auth)\(name): a\r\n\(name): b\r\n")
            #expect(answer.status == "HTTP/1.1 400" && answer.field == name, "\(name): \(answer.text)")
        }
        #expect(try await Self.answer(port, "GET /v1/accounts HTTP/1.1\r\n\(auth)client-request-id: a\r\nX-Correlation-ID: b\r\n").status == "HTTP/1.1 200")

        // A forwarded header with a control character other than HTAB (RFC 9110 §5.5) was passed on.
        let id = try await stack.signInAccountId()
        let relay = "GET /v1/downstream/graph/me HTTP/1.1\r\n\(auth)X-Account-Id: \(id)\r\n"
        for value in ["ev\u{1}entual", "eventual\u{1B}[2J", "a\u{7F}"] {
            let answer = try await Self.answer(port, relay + "ConsistencyLevel: \(value)\r\n")
            #expect(answer.status == "HTTP/1.1 400" && answer.field == "ConsistencyLevel", "\(answer.text)")
        }
        #expect(try await Self.answer(port, relay + "ConsistencyLevel: even\ttual\r\n").status == "HTTP/1.1 200")

        // A body in a coding TokenRelay does not decode (RFC 9110 §8.4): 415, on JSON routes and the relay.
        let json = #"{"scopes":["User.Read"]}"#
        let signIn = "POST /v1/sign-ins HTTP/1.1\r\n\(auth)Content-Type: application/json\r\nContent-Length: \(json.utf8.count)\r\n"
        for coding in ["gzip", "br", "identity, gzip"] {
            let answer = try await Self.answer(port, signIn + "Content-Encoding: \(coding)\r\n", body: json)
            #expect(answer.status == "HTTP/1.1 415" && answer.field == "Content-Encoding", "\(coding): \(answer.text)")
        }
        #expect(try await Self.answer(port, signIn + "Content-Encoding: identity\r\n", body: json).status == "HTTP/1.1 201")
        let mail = #"{"message":{"toRecipients":[{"emailAddress":{"address":"bob@contoso.example"}}]}}"#
        let sendMail = try await Self.answer(
            port,
            "POST /v1/downstream/graph/me/sendMail HTTP/1.1\r\n\(auth)X-Account-Id: \(id)\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: \(mail.utf8.count)\r\n",
            body: mail)
        #expect(sendMail.status == "HTTP/1.1 415" && sendMail.field == "Content-Encoding", "\(sendMail.text)")

        // A client's long name is quoted at most 200 characters, in `detail` and in `field`.
        let long = String(repeating: "n", count: 20_000)
        let member = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], long: 1])
        let query = try await stack.request("GET", "/v1/accounts?\(String(repeating: "q", count: 5000))=1")
        for answer in [member, query] {
            #expect(answer.status == 400, "\(answer.status)")
            let field = answer.json["field"] as? String ?? ""
            #expect(field.count == 201 && field.hasSuffix("…"), "field of \(field.count) characters")
            #expect((answer.json["detail"] as? String ?? "").count < 300, "\(answer.text.count) bytes")
        }
    }

    /// `e` and thousands of U+0301 is one `Character`: cut by characters, such a name was echoed
    /// whole, twice (a 50 KB member name made a 100 KB answer; attack report 42, defect 4).
    @Test(
        "A client's name of one letter and thousands of combining marks is quoted by its first 200 Unicode scalars: member, query parameter, 404 path, header name"
    )
    func quotedNamesAreCutByScalars() async throws {
        let stack = try await TokenRelayStack(name: "e2e_edges_quoted")
        defer { stack.stop() }
        let port = try ConnectionLimitsTests.port(stack)
        let marks = String(repeating: "%CC%81", count: 1_200)
        let member = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": "acc_none", "scopes": ["User.Read"], "e" + String(repeating: "\u{301}", count: 25_000): 1])
        let query = try await stack.request("GET", "/v1/accounts?e\(marks)=1")
        let path = try await stack.request("GET", "/v1/e\(marks)")
        let header = try await Self.answer(port, "GET /v1/accounts HTTP/1.1\r\nHost: x\r\nX-e\(String(repeating: "\u{301}", count: 2_000)): 1\r\n")
        // The first 200 scalars of the name (of the path: `/v1/e` and 195 marks), then `…`.
        func quoted(_ start: String) -> String { start + String(repeating: "\u{301}", count: 200 - start.unicodeScalars.count) + "…" }
        for (name, status, answer, quoted) in [
            ("member", 400, member, quoted("e")), ("query", 400, query, quoted("e")), ("path", 404, path, quoted("/v1/e")),
        ] {
            #expect(answer.status == status, "\(name): \(answer.status)")
            #expect(answer.body.count < 2_000, "\(name): an answer of \(answer.body.count) bytes")
            let detail = answer.json["detail"] as? String ?? ""
            #expect(detail.unicodeScalars.count < 300 && detail.contains(quoted), "\(name): a detail of \(detail.unicodeScalars.count) scalars")
            if name != "path" { #expect((answer.json["field"] as? String)?.unicodeScalars.elementsEqual(quoted.unicodeScalars) == true, "\(name)") }
        }
        #expect(header.status == "HTTP/1.1 400", "\(header.text.prefix(300))")
        #expect(header.text.utf8.count < 2_500, "header name: an answer of \(header.text.utf8.count) bytes")
        let problem = header.text.range(of: "\r\n\r\n").map {
            (try? JSONSerialization.jsonObject(with: Data(header.text[$0.upperBound...].utf8))) as? [String: Any]
        }
        let field = (problem ?? nil)?["field"] as? String ?? ""
        #expect(
            field.unicodeScalars.elementsEqual(quoted("X-e").unicodeScalars),
            "header name: \(field.unicodeScalars.count) scalars")
        // A valid name past the header limit (431 names the largest field): quoted the same way.
        let long = try await stack.request("GET", "/v1/accounts", headers: ["X-" + String(repeating: "n", count: 13_000): "1"])
        #expect(long.status == 431, "\(long.status)")
        #expect(long.json["field"] as? String == "X-" + String(repeating: "n", count: 198) + "…", "\(long.text.prefix(300))")
    }
}
