import Foundation
import HTTPCommon
import Testing

@testable import STSEmulator

/// Graph's server-side paging of `/v1.0/me/messages`, `POST /v1.0/me/sendMail` and `POST
/// /v1.0/$batch`, as the Graph SDK uses them through the relay (issue 12 part 3).
@Suite("Emulated Graph paging, sendMail and $batch")
struct GraphPagingMailBatchTests {
    let h: EmulatorHarness
    let token: String

    init() async throws {
        h = try EmulatorHarness()
        token = try #require(try await h.signIn()["access_token"]?.stringValue)
    }

    func send(_ method: String, _ path: String, token: String? = nil, body: JSONValue? = nil, query: [(String, String)] = []) async -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.set("Authorization", "Bearer \(token ?? self.token)")
        if body != nil { headers.set("Content-Type", "application/json") }
        return await h.emulator.respond(
            to: HTTPRequest(method: method, path: path, query: query.map { (name: $0.0, value: $0.1) }, headers: headers, body: body?.bytes ?? []))
    }

    func stats() async -> JSONValue? {
        JSONValue.parse(await h.emulator.respond(to: HTTPRequest(method: "GET", path: "/_control/stats")).body)
    }

    @Test("$top/$skip pages carry an absolute @odata.nextLink under the emulator's Graph base URL until the last page")
    func pagingWithNextLink() async throws {
        for n in 1...5 { _ = await send("POST", "/v1.0/me/messages", body: ["subject": .string("m\(n)")]) }
        var query: [(String, String)] = [("$top", "2")]
        var subjects: [String] = []
        var links: [String] = []
        for _ in 0..<10 {
            let page = await send("GET", "/v1.0/me/messages", query: query)
            #expect(page.status == 200)
            #expect(page.headers["Content-Type"]?.hasPrefix("application/json") == true)
            let body = try #require(JSONValue.parse(page.body))
            subjects += (body["value"]?.arrayValue ?? []).compactMap { $0["subject"]?.stringValue }
            guard let next = body["@odata.nextLink"]?.stringValue else { break }
            links.append(next)
            let components = try #require(URLComponents(string: next))
            query = (components.queryItems ?? []).map { ($0.name, $0.value ?? "") }
        }
        #expect(subjects == ["m1", "m2", "m3", "m4", "m5"])
        #expect(
            links == [
                EmulatorHarness.base + "/v1.0/me/messages?%24top=2&%24skip=2", EmulatorHarness.base + "/v1.0/me/messages?%24top=2&%24skip=4",
            ])
        // Without $top: Graph's default page of 10, no link when everything fits.
        let all = try #require(JSONValue.parse(await send("GET", "/v1.0/me/messages").body))
        #expect(all["value"]?.arrayValue?.count == 5 && all["@odata.nextLink"] == nil)
        #expect(await send("GET", "/v1.0/me/messages", query: [("$skip", "-1")]).status == 400)
        #expect(await send("GET", "/v1.0/me/messages", query: [("$top", "two")]).status == 400)

        let log = try #require(JSONValue.parse(await h.emulator.respond(to: HTTPRequest(method: "GET", path: "/_control/graph-requests")).body))
        let gets = (log["requests"]?.arrayValue ?? []).filter { $0["method"]?.stringValue == "GET" }
        #expect(gets.prefix(3).map { $0["query"]?["$skip"]?.stringValue } == [nil, "2", "4"])
        #expect(gets.allSatisfy { $0["token_verified"] == .bool(true) && $0["path"]?.stringValue == "/v1.0/me/messages" })
    }

    @Test("sendMail: 202 without a body, counted in the stats; no message or no recipient is 400; no token is 401 and logged unverified")
    func sendMail() async throws {
        let mail: JSONValue = [
            "message": ["subject": "Hi", "toRecipients": [["emailAddress": ["address": "bob@contoso.example"]]]], "saveToSentItems": false,
        ]
        let sent = await send("POST", "/v1.0/me/sendMail", body: mail)
        #expect(sent.status == 202 && sent.body.isEmpty)
        #expect(sent.headers["request-id"] != nil)
        #expect(await stats()?["sent_mail"]?.intValue == 1)
        // Parameter names in any case, as the Graph SDK for Python writes them.
        let sdkShape: JSONValue = ["Message": ["toRecipients": [["emailAddress": ["address": "bob@contoso.example"]]]], "SaveToSentItems": false]
        #expect(await send("POST", "/v1.0/me/sendMail", body: sdkShape).status == 202)
        #expect(await stats()?["sent_mail"]?.intValue == 2)
        #expect(await send("POST", "/v1.0/me/sendMail", body: ["saveToSentItems": true]).status == 400)
        // The message says what the body is: a body that is not JSON was "Empty Payload".
        var headers = HTTPHeaders()
        headers.set("Authorization", "Bearer \(token)")
        headers.set("Content-Type", "application/json")
        for (body, expected) in [("not json", "is not JSON"), ("", "Empty Payload"), (#"{"saveToSentItems":true}"#, "'message' object")] {
            let answer = await h.emulator.respond(
                to: HTTPRequest(method: "POST", path: "/v1.0/me/sendMail", headers: headers, body: Array(body.utf8)))
            let error = JSONValue.parse(answer.body)?["error"]
            #expect(answer.status == 400 && error?["code"]?.stringValue == "RequestBodyRead", "\(body)")
            #expect(error?["message"]?.stringValue?.contains(expected) == true, "\(body): \(String(decoding: answer.body, as: UTF8.self))")
        }
        let noRecipient = await send("POST", "/v1.0/me/sendMail", body: ["message": ["subject": "Hi"]])
        #expect(noRecipient.status == 400 && JSONValue.parse(noRecipient.body)?["error"]?["code"]?.stringValue == "ErrorInvalidRecipients")
        #expect(await send("POST", "/v1.0/me/sendMail", token: "trk_notatoken_x", body: mail).status == 401)
        #expect(await send("GET", "/v1.0/me/sendMail").status == 404)
        #expect(await stats()?["sent_mail"]?.intValue == 2)
        let log = try #require(JSONValue.parse(await h.emulator.respond(to: HTTPRequest(method: "GET", path: "/_control/graph-requests")).body))
        #expect(log["requests"]?.arrayValue?.last?["token_verified"] == .bool(false))
    }

    @Test("$batch answers each sub-request against the Graph routes with its own status; dependsOn on a failure is 424")
    func batch() async throws {
        let batch: JSONValue = [
            "requests": [
                ["id": "1", "method": "GET", "url": "/me"],
                [
                    "id": "2", "method": "POST", "url": "me/messages", "headers": ["Content-Type": "application/json"],
                    "body": ["subject": "from a batch"],
                ],
                ["id": "3", "method": "GET", "url": "/me/messages?$top=1"],
                ["id": "4", "method": "GET", "url": "/me/messages/missing"],
                ["id": "5", "method": "GET", "url": "/me", "dependsOn": ["4"]],
                ["id": "6", "method": "POST", "url": "/me/messages", "body": ["subject": "no content type"]],
                ["id": "7", "method": "GET", "url": "/nowhere"],
                ["id": "8", "method": "GET", "url": .string(EmulatorHarness.base + "/v1.0/me")],
            ]
        ]
        let before = await stats()?["graph_requests"]?.intValue ?? 0
        let answer = await send("POST", "/v1.0/$batch", body: batch)
        #expect(answer.status == 200)
        let responses = try #require(JSONValue.parse(answer.body)?["responses"]?.arrayValue)
        func response(_ id: String) -> JSONValue? { responses.first { $0["id"]?.stringValue == id } }
        #expect(responses.count == 8)
        #expect(response("1")?["status"]?.intValue == 200)
        #expect(response("1")?["body"]?["userPrincipalName"]?.stringValue == "alice@contoso.example")
        #expect(response("2")?["status"]?.intValue == 201)
        #expect(response("2")?["headers"]?["Location"]?.stringValue?.hasPrefix(EmulatorHarness.base + "/v1.0/me/messages/") == true)
        #expect(response("3")?["body"]?["value"]?.arrayValue?.first?["subject"]?.stringValue == "from a batch")
        #expect(response("4")?["status"]?.intValue == 404)
        #expect(response("4")?["body"]?["error"]?["code"]?.stringValue == "ErrorItemNotFound")
        #expect(response("5")?["status"]?.intValue == 424)
        #expect(response("6")?["status"]?.intValue == 400)
        #expect(response("7")?["status"]?.intValue == 400)
        #expect(response("8")?["status"]?.intValue == 400, "an absolute URL is refused, as Graph refuses it")
        // The batch and its four sub-requests that reached a Graph route (1, 2, 3, 4).
        #expect(await stats()?["graph_requests"]?.intValue == before + 5)
    }

    @Test("A malformed batch, more than 20 requests or a repeated id fails the whole batch with 400; no token is 401")
    func batchRefused() async throws {
        let one: JSONValue = ["id": "1", "method": "GET", "url": "/me"]
        #expect(await send("POST", "/v1.0/$batch", body: ["requests": []]).status == 400)
        #expect(await send("POST", "/v1.0/$batch", body: ["requests": [["id": "1", "url": "/me"]]]).status == 400)
        #expect(await send("POST", "/v1.0/$batch", body: ["requests": [one, ["id": "1", "method": "GET", "url": "/me"]]]).status == 400)
        let many = (1...21).map { JSONValue.object([("id", .string("\($0)")), ("method", "GET"), ("url", "/me")]) }
        #expect(await send("POST", "/v1.0/$batch", body: ["requests": .array(many)]).status == 400)
        #expect(await send("POST", "/v1.0/$batch", body: ["requests": .array(Array(many.prefix(20)))]).status == 200)
        #expect(await send("POST", "/v1.0/$batch", token: "nope", body: ["requests": [one]]).status == 401)
    }
}
