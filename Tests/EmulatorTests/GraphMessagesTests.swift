import Foundation
import HTTPCommon
import Testing

@testable import STSEmulator

/// Graph's `/v1.0/me/messages`: the writable resource downstream relaying is tested against.
@Suite("Emulated Graph messages")
struct GraphMessagesTests {
    func send(_ h: EmulatorHarness, _ method: String, _ path: String, token: String, body: JSONValue? = nil, query: [(String, String)] = [])
        async -> HTTPResponse
    {
        var headers: HTTPHeaders = ["Authorization": "Bearer \(token)"]
        if body != nil { headers.set("Content-Type", "application/json") }
        return await h.emulator.respond(
            to: HTTPRequest(method: method, path: path, query: query.map { (name: $0.0, value: $0.1) }, headers: headers, body: body?.bytes ?? []))
    }

    @Test func createUpdateListDeleteAndCountByMethod() async throws {
        let h = try EmulatorHarness()
        let token = try #require(try await h.signIn()["access_token"]?.stringValue)
        let created = await send(h, "POST", "/v1.0/me/messages", token: token, body: ["subject": "Hello"])
        #expect(created.status == 201)
        #expect(created.headers["Location"]?.hasPrefix(EmulatorHarness.base + "/v1.0/me/messages/") == true)
        #expect(created.headers["request-id"] != nil)
        let id = try #require(JSONValue.parse(created.body)?["id"]?.stringValue)
        _ = await send(h, "POST", "/v1.0/me/messages", token: token, body: ["subject": "Second"])

        let patched = await send(h, "PATCH", "/v1.0/me/messages/\(id)", token: token, body: ["subject": "Changed"])
        #expect(patched.status == 200)
        #expect(JSONValue.parse(patched.body)?["subject"]?.stringValue == "Changed")
        let top = await send(h, "GET", "/v1.0/me/messages", token: token, query: [("$top", "1")])
        #expect(JSONValue.parse(top.body)?["value"]?.arrayValue?.count == 1)
        #expect(await send(h, "DELETE", "/v1.0/me/messages/\(id)", token: token).status == 204)
        #expect(await send(h, "GET", "/v1.0/me/messages/\(id)", token: token).status == 404)
        #expect(await send(h, "POST", "/v1.0/me/messages", token: token, body: .string("not an object")).status == 400)
        #expect(await send(h, "PUT", "/v1.0/me/messages", token: token).status == 404)
        #expect(await send(h, "POST", "/v1.0/me/messages", token: "not-a-token", body: ["subject": "x"]).status == 401)

        let stats = await h.emulator.respond(to: HTTPRequest(method: "GET", path: "/_control/stats"))
        let byMethod = JSONValue.parse(stats.body)?["graph_requests_by_method"]
        #expect(byMethod?["POST"]?.intValue == 4)
        #expect(byMethod?["PATCH"]?.intValue == 1)
        #expect(byMethod?["DELETE"]?.intValue == 1)
    }

    @Test func graphFaultsApplyToMessagesToo() async throws {
        let h = try EmulatorHarness()
        let token = try #require(try await h.signIn()["access_token"]?.stringValue)
        _ = await h.control("faults", ["endpoint": "graph", "status": 500])
        #expect(await send(h, "POST", "/v1.0/me/messages", token: token, body: ["subject": "x"]).status == 500)
        #expect(await send(h, "POST", "/v1.0/me/messages", token: token, body: ["subject": "x"]).status == 201)
    }
}
