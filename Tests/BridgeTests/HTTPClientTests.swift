import Foundation
import HTTPClientBridge
import HTTPCommon
import Testing
import TokenRelayTesting

/// The libcurl client against a real loopback peer (`HTTPClientTestPeer`); every test has its own
/// port, so they run in parallel.
@Suite("HTTP client (libcurl)")
struct HTTPClientTests {
    let client = HTTPClient()

    @Test func getWithHeadersRoundTrip() async throws {
        let peer = try HTTPClientTestPeer { request in
            .respond(.init(headers: [("X-Echo", request.headers["x-test"] ?? "missing")], body: Array(request.target.utf8)))
        }
        defer { peer.stop() }
        let response = try await client.execute(
            HTTPClientRequest(url: peer.url("/v1/path?a=1&b=%20"), headers: ["X-Test": "value 1", "Accept": "application/json"]))
        #expect(response.status == 200)
        #expect(response.body == Array("/v1/path?a=1&b=%20".utf8))
        #expect(response.headers["x-echo"] == "value 1")
        #expect(response.headers["X-ECHO"] == "value 1")
        #expect(response.headers["content-length"] == "18")
        let seen = try #require(peer.requests.first)
        #expect(seen.method == "GET")
        #expect(seen.headers["Accept"] == "application/json")
        #expect(seen.body.isEmpty)
    }

    /// The header lines are written from the fields' bytes since issue 30: an empty value, a
    /// repeated name and UTF-8 arrive as they did; CR, LF or a colon in a name is refused unsent.
    @Test func headerLinesAsGiven() async throws {
        let peer = try HTTPClientTestPeer { _ in .respond(.init()) }
        defer { peer.stop() }
        var headers: HTTPHeaders = ["X-Empty": "", "X-Twice": "one", "X-Text": "é ü 1"]
        headers.add("X-Twice", "two")
        _ = try await client.execute(HTTPClientRequest(url: peer.url("/h"), headers: headers))
        let seen = try #require(peer.requests.first)
        #expect(seen.headers["X-Empty"] == "" && seen.headers["X-Text"] == "é ü 1")
        #expect(Array(seen.headers.values(for: "x-twice")) == ["one", "two"])
        for bad: HTTPHeaders in [["X-Bad": "a\r\nX-Evil: 1"], ["X-Bad": "a\nb"], ["X:Bad": "a"], ["": "a"], ["X-Ok": "1", "X-Bad\r": "a"]] {
            await #expect(throws: HTTPClientError.self) { _ = try await client.execute(HTTPClientRequest(url: peer.url("/bad"), headers: bad)) }
        }
        #expect(peer.requests.count == 1)
    }

    @Test func postBinaryBodyArrivesIntact() async throws {
        let peer = try HTTPClientTestPeer { .respond(.init(body: $0.body)) }
        defer { peer.stop() }
        let body: [UInt8] = [0, 1, 0, 0xff, 0] + SecureBytes.make(200_000) + [0, 0]
        let response = try await client.execute(
            HTTPClientRequest(
                method: "POST", url: peer.url("/token"), headers: ["Content-Type": "application/octet-stream"], body: body))
        #expect(response.status == 200)
        #expect(response.body == body)
        let seen = try #require(peer.requests.first)
        #expect(seen.method == "POST")
        #expect(seen.body == body)
        #expect(seen.headers["Content-Type"] == "application/octet-stream")
        #expect(seen.headers["Expect"] == nil)
    }

    @Test(arguments: ["PUT", "DELETE", "PATCH"])
    func otherMethodsCarryBody(method: String) async throws {
        let peer = try HTTPClientTestPeer { _ in .respond(.init(status: 204, body: [])) }
        defer { peer.stop() }
        let response = try await client.execute(HTTPClientRequest(method: method, url: peer.url("/x"), body: [1, 2, 3]))
        #expect(response.status == 204)
        let seen = try #require(peer.requests.first)
        #expect(seen.method == method)
        #expect(seen.body == [1, 2, 3])
    }

    @Test func deleteWithoutBody() async throws {
        let peer = try HTTPClientTestPeer { _ in .respond(.init()) }
        defer { peer.stop() }
        _ = try await client.execute(HTTPClientRequest(method: "DELETE", url: peer.url("/x")))
        #expect(peer.requests.first?.method == "DELETE")
    }

    @Test func errorStatusesPassThrough() async throws {
        let peer = try HTTPClientTestPeer { request in
            request.target == "/missing"
                ? .respond(.init(status: 404, body: Array("nope".utf8)))
                : .respond(.init(status: 503, headers: [("Retry-After", "7")]))
        }
        defer { peer.stop() }
        let missing = try await client.execute(HTTPClientRequest(url: peer.url("/missing")))
        #expect(missing.status == 404)
        #expect(missing.body == Array("nope".utf8))
        let unavailable = try await client.execute(HTTPClientRequest(url: peer.url("/busy")))
        #expect(unavailable.status == 503)
        #expect(unavailable.headers["retry-after"] == "7")
    }

    @Test func redirectsAreNotFollowed() async throws {
        let peer = try HTTPClientTestPeer { _ in .respond(.init(status: 302, headers: [("Location", "/elsewhere")])) }
        defer { peer.stop() }
        let response = try await client.execute(HTTPClientRequest(url: peer.url("/authorize")))
        #expect(response.status == 302)
        #expect(response.headers["location"] == "/elsewhere")
        #expect(peer.requests.count == 1)
    }

    @Test func onlyFinalHeaderBlockIsKept() async throws {
        let peer = try HTTPClientTestPeer { _ in
            .respond(.init(headers: [("X-Final", "yes"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")], interimContinue: true))
        }
        defer { peer.stop() }
        let response = try await client.execute(HTTPClientRequest(method: "POST", url: peer.url("/"), body: [1]))
        #expect(response.status == 200)
        #expect(response.headers["x-final"] == "yes")
        #expect(response.headers["x-interim"] == nil)
        #expect(response.headers.values(for: "set-cookie") == ["a=1", "b=2"])
    }

    @Test func chunkedBodyIsDecoded() async throws {
        let body = SecureBytes.make(10_000)
        let peer = try HTTPClientTestPeer { _ in .respond(.init(body: body, chunked: true)) }
        defer { peer.stop() }
        let response = try await client.execute(HTTPClientRequest(url: peer.url("/")))
        #expect(response.body == body)
    }

    @Test(arguments: [false, true])
    func responseLimitIsEnforced(chunked: Bool) async throws {
        let small = HTTPClient(maxResponseBytes: 1000)
        defer { small.shutdown() }
        let peer = try HTTPClientTestPeer { request in
            .respond(.init(body: [UInt8](repeating: 7, count: request.target == "/big" ? 1001 : 1000), chunked: chunked))
        }
        defer { peer.stop() }
        #expect(try await small.execute(HTTPClientRequest(url: peer.url("/fits"))).body.count == 1000)
        let error = await #expect(throws: HTTPClientError.self) { try await small.execute(HTTPClientRequest(url: peer.url("/big"))) }
        #expect(error?.kind == .tooLarge)
    }

    @Test func timeoutOnSilentPeer() async throws {
        let (socket, port) = try HTTPClientTestPeer.silentListener()
        defer { close(socket) }
        let clock = ContinuousClock()
        let start = clock.now
        let error = await #expect(throws: HTTPClientError.self) {
            try await client.execute(HTTPClientRequest(method: "POST", url: "http://127.0.0.1:\(port)/token", body: [1], timeout: 0.5))
        }
        let elapsed = clock.now - start
        #expect(error?.kind == .timedOut)
        #expect(error?.requestSent == true)
        // Not before the timeout; the upper bound only says it did not wait for the peer (which
        // never answers): generous, because a loaded 2-core machine delays the curl thread.
        #expect(elapsed >= .milliseconds(450) && elapsed < .seconds(60), "took \(elapsed)")
    }

    @Test func connectToClosedPortFails() async throws {
        let port = try HTTPClientTestPeer.closedPort()
        let error = await #expect(throws: HTTPClientError.self) {
            try await client.execute(
                HTTPClientRequest(url: "http://127.0.0.1:\(port)/token?client_secret=hunter2", headers: ["Authorization": "Bearer abc.def"]))
        }
        #expect(error?.kind == .connectFailed)
        #expect(error?.requestSent == false)
        let text = error.map { String(describing: $0) } ?? ""
        #expect(text.contains("curl"))
        #expect(!text.contains("hunter2") && !text.contains("abc.def"))
    }

    @Test(arguments: ["ftp://127.0.0.1/x", "not a url", "http://"])
    func invalidURLs(url: String) async throws {
        let error = await #expect(throws: HTTPClientError.self) { try await client.execute(HTTPClientRequest(url: url)) }
        #expect(error?.kind == .invalidURL, "\(String(describing: error))")
        #expect(error?.requestSent == false)
    }

    @Test func headerInjectionIsRefused() async throws {
        let peer = try HTTPClientTestPeer { _ in .respond(.init()) }
        defer { peer.stop() }
        let error = await #expect(throws: HTTPClientError.self) {
            try await client.execute(HTTPClientRequest(url: peer.url("/"), headers: ["X-A": "1\r\nX-Injected: 2"]))
        }
        #expect(error?.requestSent == false)
        #expect(peer.requests.isEmpty)
    }

    @Test func hundredConcurrentRequests() async throws {
        let peer = try HTTPClientTestPeer { .respond(.init(body: Array($0.target.utf8))) }
        defer { peer.stop() }
        let client = self.client
        let results = try await withThrowingTaskGroup(of: (Int, HTTPClientResponse).self) { group in
            for index in 0..<100 {
                group.addTask { (index, try await client.execute(HTTPClientRequest(url: peer.url("/item/\(index)")))) }
            }
            return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        #expect(results.count == 100)
        for (index, response) in results {
            #expect(response.status == 200)
            #expect(response.body == Array("/item/\(index)".utf8))
        }
        #expect(peer.requests.count == 100)
    }

    @Test func sequentialRequestsReuseOneConnection() async throws {
        let peer = try HTTPClientTestPeer { _ in .respond(.init(body: [1])) }
        defer { peer.stop() }
        for _ in 0..<5 {
            let response = try await client.execute(HTTPClientRequest(method: "POST", url: peer.url("/token"), body: [2]))
            #expect(response.status == 200)
        }
        #expect(peer.requests.count == 5)
        #expect(peer.connectionCount == 1)
        #expect(Set(peer.requests.map(\.connection)) == [1])
    }

    @Test(.timingGroup(.measuring)) func cancellationAbandonsTransfer() async throws {
        let peer = try HTTPClientTestPeer { _ in .never }
        defer { peer.stop() }
        let client = self.client
        let task = Task { try await client.execute(HTTPClientRequest(url: peer.url("/slow"), timeout: 30)) }
        // Wait until the request reached the peer (bounded), then cancel.
        for _ in 0..<500 where peer.requests.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        #expect(peer.requests.count == 1)
        let clock = ContinuousClock()
        let start = clock.now
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(clock.now - start < .seconds(5))
    }

    @Test func shutdownFailsLaterRequests() async throws {
        let peer = try HTTPClientTestPeer { _ in .respond(.init()) }
        defer { peer.stop() }
        let client = HTTPClient()
        #expect(try await client.execute(HTTPClientRequest(url: peer.url("/"))).status == 200)
        client.shutdown()
        client.shutdown()
        let error = await #expect(throws: HTTPClientError.self) { try await client.execute(HTTPClientRequest(url: peer.url("/"))) }
        #expect(error?.kind == .other)
    }

    @Test func shutdownFailsRunningRequests() async throws {
        let peer = try HTTPClientTestPeer { _ in .never }
        defer { peer.stop() }
        let client = HTTPClient()
        let task = Task { try await client.execute(HTTPClientRequest(url: peer.url("/slow"), timeout: 30)) }
        for _ in 0..<500 where peer.requests.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        client.shutdown()
        let error = await #expect(throws: HTTPClientError.self) { try await task.value }
        #expect(error?.kind == .other)
    }
}

/// Random test payloads (with plenty of zero bytes) without importing CryptoBridge here.
enum SecureBytes {
    static func make(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) & (Bool.random() ? 0 : 0xff) }
    }
}
