import Foundation
import HTTPCommon
import HTTPServerBridge
import Synchronization
import Testing
import TokenRelayTesting

/// A handler built from closures; `immediate` returning nil sends the request down the async path.
struct ClosureHandler: HTTPHandler {
    var immediate: @Sendable (HTTPRequest) -> HTTPResponse? = { _ in nil }
    var async: @Sendable (HTTPRequest) async -> HTTPResponse = { _ in HTTPResponse(status: 200) }

    func respondImmediately(to request: HTTPRequest) -> HTTPFirstStep<HTTPRequest> {
        immediate(request).map { .respond($0) } ?? .suspend(request)
    }
    func respond(to request: HTTPRequest) async -> HTTPResponse { await async(request) }
}

/// Remembers the requests a handler saw.
final class RequestLog: Sendable {
    private let requests = Mutex<[HTTPRequest]>([])
    func record(_ request: HTTPRequest) { requests.withLock { $0.append(request) } }
    var all: [HTTPRequest] { requests.withLock { $0 } }
}

/// A one-shot gate an async handler waits on until the test opens it.
final class Gate: Sendable {
    private let state = Mutex<(isOpen: Bool, waiters: [CheckedContinuation<Void, Never>], entered: Int)>((false, [], 0))
    func wait() async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state -> Bool in
                state.entered += 1
                if state.isOpen { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }
    var entered: Int { state.withLock { $0.entered } }
    func open() {
        let waiters = state.withLock { state in
            state.isOpen = true
            defer { state.waiters = [] }
            return state.waiters
        }
        waiters.forEach { $0.resume() }
    }
}

private func startServer(
    _ handler: some HTTPHandler, threadCount: Int = 2, maxBodyBytes: Int = 65536, host: String = "127.0.0.1"
) throws -> HTTPServer {
    let server = HTTPServer(
        configuration: HTTPServerConfiguration(host: host, port: 0, threadCount: threadCount, maxBodyBytes: maxBodyBytes),
        handler: handler)
    try server.start()
    return server
}

/// A server whose every request is answered 200 by the suspended step and recorded in the log.
private func startRecordingServer() throws -> (HTTPServer, RequestLog) {
    let log = RequestLog()
    let server = try startServer(
        ClosureHandler(async: { request in
            log.record(request)
            return HTTPResponse(status: 200)
        }))
    return (server, log)
}

/// A server answering `GET /now/N` on the polling thread and `GET /later/N` from the suspended
/// step, each with `body(N)`.
private func startBodyServer(_ body: @escaping @Sendable (Int) -> [UInt8]) throws -> HTTPServer {
    try startServer(
        ClosureHandler(
            immediate: { request in
                request.path.hasPrefix("/now/") ? HTTPResponse(status: 200, body: body(Int(request.path.dropFirst(5))!)) : nil
            },
            async: { request in
                await Task.yield()
                return HTTPResponse(status: 200, body: body(Int(request.path.dropFirst(7))!))
            }))
}

@Suite("HTTPServer on libmicrohttpd", .serialized)
struct HTTPServerTests {
    @Test("respondImmediately answers on the polling thread, with headers, Content-Length and HEAD")
    func immediatePath() async throws {
        let json = #"{"status":"pass"}"#
        let server = try startServer(
            ClosureHandler(
                immediate: { request in
                    HTTPResponse(status: 200, headers: ["Content-Type": "application/json", "X-Path": request.path], body: Array(json.utf8))
                }, async: { _ in HTTPResponse(status: 500) }))
        defer { server.stop() }
        #expect(server.port > 0)
        let port = server.port
        let (get, head) = try await onOwnThread {
            let connection = try RawHTTPConnection(port: port)
            try connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            let get = try connection.readResponse()
            try connection.send("HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            let head = try connection.readResponse(hasBody: false)
            return (get, head)
        }
        #expect(get.status == 200)
        #expect(get.text == json)
        #expect(get.header("content-type") == "application/json")
        #expect(get.header("x-path") == "/healthz")
        #expect(get.header("content-length") == "\(json.utf8.count)")
        #expect(head.status == 200)
        #expect(head.body.isEmpty)
        #expect(head.header("content-length") == "\(json.utf8.count)")
    }

    @Test("50 concurrent async requests sleeping 200 ms on 2 threads finish together, not one after another", .timingGroup(.measuring))
    func asyncPathHoldsNoThread() async throws {
        let server = try startServer(
            ClosureHandler(async: { request in
                try? await Task.sleep(for: .milliseconds(200))
                return HTTPResponse(status: 201, body: Array(request.path.utf8))
            }), threadCount: 2)
        defer { server.stop() }
        let port = server.port
        let start = ContinuousClock.now
        let responses = try await onOwnThread {
            // All 50 requests go out before any answer is read: they are in flight together.
            let connections = try (0..<50).map { _ in try RawHTTPConnection(port: port) }
            for (index, connection) in connections.enumerated() {
                try connection.send("GET /slow/\(index) HTTP/1.1\r\nHost: x\r\n\r\n")
            }
            return try connections.map { try $0.readResponse() }
        }
        let elapsed = ContinuousClock.now - start
        #expect(responses.map(\.status) == Array(repeating: 201, count: 50))
        #expect(responses.map(\.text) == (0..<50).map { "/slow/\($0)" })
        #expect(elapsed < .seconds(6), "took \(elapsed); 50 × 200 ms serially would be 10 s")
    }

    /// libmicrohttpd 0.9.75 refuses these itself, before or instead of calling the access
    /// handler, with an HTML page compiled into it: no option, callback or flag lets the server
    /// answer them (behaviour.md, Known gaps). Pinned, so that a libmicrohttpd that changes it
    /// (or lets us answer) is seen.
    @Test(
        "Requests libmicrohttpd refuses itself get its own page (400 for a Content-Length or chunk size not a number or no HTTP version, 413 for a Content-Length past its count, 505 for HTTP/9.9 and HTTP/2.0); the handler never runs"
    )
    func libmicrohttpdRefusals() async throws {
        let (server, log) = try startRecordingServer()
        defer { server.stop() }
        let port = server.port
        let heads = [
            "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
            "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
            "GET /x HTTP/9.9\r\nHost: x\r\n\r\n",
            "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
            "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            "GET /x\r\nHost: x\r\n\r\n",
            "GET /x HTTP/2.0\r\nHost: x\r\n\r\n",
            // A blank after the number, a list of one value twice (RFC 9110 §5.5, §8.6): digits to the value's end only.
            "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2 \r\n\r\n{}",
            "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2, 2\r\n\r\n{}",
        ]
        let answers = try await onOwnThread {
            try heads.map { head in
                let connection = try RawHTTPConnection(port: port)
                try connection.send(head)
                return try connection.readResponse()
            }
        }
        #expect(answers.map(\.status) == [400, 400, 505, 400, 413, 400, 505, 400, 400])
        for answer in answers {
            #expect(answer.header("content-type")?.hasPrefix("text/html") ?? true, "\(answer.header("content-type") ?? "none")")
            #expect(answer.text.contains("<html>"), "\(answer.text)")
        }
        #expect(log.all.isEmpty, "the handler ran for \(log.all.map(\.path))")
    }

    @Test("method, path, query, headers, body and peer reach the handler intact")
    func requestReachesHandler() async throws {
        let (server, log) = try startRecordingServer()
        defer { server.stop() }
        let port = server.port
        let body = "{\"a\":\"é\"}"
        let response = try await onOwnThread {
            let connection = try RawHTTPConnection(port: port)
            try connection.send(
                "POST /v1/a%20b/c%2Fd%25e?x=1&x=2&y=hello%20world&z=a+b&flag&e=%C3%A9 HTTP/1.1\r\nHost: x\r\nX-Custom: Value 1\r\n"
                    + "x-multi: one\r\nX-Multi: two\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
            return try connection.readResponse()
        }
        #expect(response.status == 200)
        let request = try #require(log.all.first)
        #expect(request.method == "POST")
        // An encoded `/` stays in its segment (and `%25`, which would read as an escape once decoded).
        #expect(request.path == "/v1/a b/c%2Fd%25e")
        #expect(request.query.map(\.name) == ["x", "x", "y", "z", "flag", "e"])
        #expect(request.query.map(\.value) == ["1", "2", "hello world", "a b", "", "é"])
        #expect(request.queryValue("x") == "1")
        #expect(request.headers["x-custom"] == "Value 1")
        #expect(request.headers["X-CUSTOM"] == "Value 1")
        #expect(request.headers.values(for: "X-Multi") == ["one", "two"])
        #expect(request.body == Array(body.utf8))
        #expect(request.bodyExceededLimit == false)
        #expect(request.remoteAddress == "127.0.0.1")
    }

    @Test("%00 stays three characters in the path (a decoded NUL would cut the C string short); in a query value it is a NUL")
    func percentZeroIsKept() async throws {
        let answer = try await served("/v1/accounts/abc%00garbage%41?q=x%00y&r=%41%25")
        #expect(answer.status == 200)
        let request = try #require(answer.request)
        #expect(request.path == "/v1/accounts/abc%00garbageA")
        #expect(request.query.map(\.value) == ["x\0y", "A%"])
    }

    /// The status of `GET target` answered by a handler that records the request, and the
    /// request as the server built it.
    private func served(_ target: String) async throws -> (status: Int, request: HTTPRequest?) {
        let (server, log) = try startRecordingServer()
        defer { server.stop() }
        let port = server.port
        let response = try await onOwnThread {
            let connection = try RawHTTPConnection(port: port)
            try connection.send("GET \(target) HTTP/1.1\r\nHost: x\r\n\r\n")
            return try connection.readResponse()
        }
        return (response.status, log.all.first)
    }

    /// The statuses of `GET target` for each target, each on its own connection, and the
    /// refusals the handler was asked for, in order.
    private func refusals(of targets: [String]) async throws -> (statuses: [Int], refusals: [(HTTPHeadRefusal, HTTPRequest)]) {
        let recorder = RefusalRecorder()
        let server = try startServer(recorder)
        defer { server.stop() }
        let port = server.port
        let statuses = try await onOwnThread {
            try targets.map { target in
                let connection = try RawHTTPConnection(port: port)
                try connection.send("GET \(target) HTTP/1.1\r\nHost: x\r\n\r\n")
                return try connection.readResponse().status
            }
        }
        return (statuses, recorder.log.withLock { $0 })
    }

    /// The handler's refusal of each request, with the request as the server built it, and the requests it served.
    final class RefusalRecorder: HTTPHandler {
        let log = Mutex<[(HTTPHeadRefusal, HTTPRequest)]>([])
        let served = RequestLog()
        func respondImmediately(to request: HTTPRequest) -> HTTPFirstStep<HTTPRequest> {
            served.record(request)
            return .respond(HTTPResponse(status: 200))
        }
        func respond(to request: HTTPRequest) async -> HTTPResponse { HTTPResponse(status: 200) }
        func refused(_ refusal: HTTPHeadRefusal, request: HTTPRequest) -> HTTPResponse {
            log.withLock { $0.append((refusal, request)) }
            return HTTPResponse(status: refusal.status)
        }
    }

    /// libmicrohttpd 0.9.75 frames a body as chunked only when `Transfer-Encoding` is `chunked`
    /// itself (ASCII case aside, blanks before it skipped) and reads any other until the
    /// connection closes; the head's reading took every list RFC 9110 reads as `chunked` alone
    /// (`chunked,`, `chunked ` with a blank after it) and Unicode's lowercasing (the Kelvin sign
    /// as `k`), so those requests got no answer (attack report 42, defect 1).
    @Test(
        "Transfer-Encoding other than libmicrohttpd's own 'chunked' is refused with 400 naming it before the body is read, the connection closed; 'chunked' in any ASCII case frames the body"
    )
    func transferEncodingAsLibmicrohttpdFramesIt() async throws {
        let recorder = RefusalRecorder()
        let server = try startServer(recorder)
        defer { server.stop() }
        let port = server.port
        let refused = ["chunked,", "chunked, ", ", chunked", ",,chunked", "chunked,,", "chunked ,", "chunked\t", "CHUNKED ", "chun\u{212A}ed"]
        let framed = ["chunked", "CHUNKED", "Chunked", " \tchunked"]
        // (status or -1 for no answer, the server closed the connection after it)
        let answers = await onOwnThread {
            (refused + framed).map { value -> (Int, Bool) in
                guard let connection = try? RawHTTPConnection(port: port) else { return (-1, false) }
                try? connection.send("POST /te HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: \(value)\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
                guard let response = try? connection.readResponse() else { return (-1, false) }
                return (response.status, response.status == 200 || connection.isClosedByPeer())
            }
        }
        for (value, answer) in zip(refused + framed, answers) {
            #expect(answer.0 == (refused.contains(value) ? 400 : 200), "\(value.debugDescription): \(answer.0)")
            #expect(answer.1, "\(value.debugDescription): the connection stayed open")
        }
        let refusals = recorder.log.withLock { $0.map(\.0) }
        #expect(refusals.count == refused.count)
        #expect(refusals.allSatisfy { $0.status == 400 && $0.field == "Transfer-Encoding" }, "\(refusals)")
        #expect(recorder.served.all.map(\.body) == Array(repeating: Array("hello".utf8), count: framed.count))
    }

    @Test("A '%' not followed by two hex digits is refused with 400 naming the query parameter holding it (or the path), not read as text")
    func malformedPercentEscapeIsRefused() async throws {
        // (target, the refusal's field; nil: the path)
        let cases: [(String, String?)] = [
            ("/v1/accounts?username=%zz", "username"),
            ("/v1/accounts?limit=5&tenant_id=%zz&state=active", "tenant_id"),
            ("/v1/audit?actor=abc%4", "actor"),
            ("/v1/audit?actor=abc%", "actor"),
            ("/v1/accounts?user%2Bname=%G1", "user+name"),
            ("/v1/accounts?a+b=%%41", "a b"),
            ("/v1/accounts?flag&na%zzme=1", "na%zzme"),
            ("/v1/accounts/abc%zz?x=1", nil),
        ]
        let answers = try await refusals(of: cases.map(\.0))
        #expect(answers.statuses == Array(repeating: 400, count: cases.count))
        let refused = answers.refusals
        #expect(refused.map(\.0.field) == cases.map(\.1))
        for (refusal, request) in refused {
            #expect(refusal.status == 400)
            #expect(refusal.reason.contains("RFC 3986 §2.1"), "\(refusal.reason)")
            // Nothing of the query but the parameter's name reached the application.
            #expect(request.query.count <= 1 && request.query.allSatisfy { $0.value.isEmpty }, "\(request.query)")
        }
        // Well-formed escapes, `%25` among them, are read as before.
        let fine = try await served("/v1/accounts?username=%25zz&x=%41%62")
        #expect(fine.status == 200)
        #expect(fine.request?.query.map(\.value) == ["%zz", "Ab"])
    }

    @Test("A query parameter whose name or value is not UTF-8 once decoded is refused with 400 naming it, not read with U+FFFD in place of its bytes")
    func queryNotUTF8IsRefused() async throws {
        // (target, the refusal's field)
        let cases: [(String, String)] = [
            ("/v1/accounts?username=%C3%28", "username"),
            ("/v1/accounts?limit=5&username=%E2%82", "username"),
            ("/v1/audit?actor=%FF", "actor"),
            ("/v1/accounts?na%C0me=1", "na\u{FFFD}me"),
        ]
        let answers = try await refusals(of: cases.map(\.0))
        #expect(answers.statuses == Array(repeating: 400, count: cases.count))
        let refused = answers.refusals
        #expect(refused.map(\.0.field) == cases.map(\.1))
        #expect(refused.allSatisfy { $0.0.reason.contains("RFC 3986 §2.5") })
        // UTF-8 escapes are read as before.
        let fine = try await served("/v1/accounts?username=J%C3%B6rg")
        #expect(fine.status == 200)
        #expect(fine.request?.query.map(\.value) == ["Jörg"])
    }

    @Test("a body over maxBodyBytes: handler sees bodyExceededLimit and an empty body, a declared one answered before it is read")
    func bodyLimit() async throws {
        let log = RequestLog()
        let server = try startServer(
            ClosureHandler(
                immediate: { request in
                    log.record(request)
                    if request.path == "/async" { return nil }
                    return HTTPResponse(status: request.bodyExceededLimit ? 413 : 200)
                },
                async: { request in
                    HTTPResponse(status: request.bodyExceededLimit ? 413 : 200)
                }), maxBodyBytes: 16)
        defer { server.stop() }
        let port = server.port
        let (declared, chunked, async, atLimit) = try await onOwnThread {
            // Only the headers are sent: the answer must not wait for the 100 000 declared bytes.
            let first = try RawHTTPConnection(port: port)
            try first.send("POST /declared HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
            let declared = try first.readResponse()

            let second = try RawHTTPConnection(port: port)
            let chunk = String(repeating: "y", count: 10)
            try second.send("POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\na\r\n\(chunk)\r\n")
            try second.send("a\r\n\(chunk)\r\n0\r\n\r\n")  // 20 bytes, over 16: read, dropped, answered at the end
            let chunked = try second.readResponse()

            let third = try RawHTTPConnection(port: port)
            try third.send("POST /async HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n\(String(repeating: "z", count: 5000))")
            let async = try third.readResponse()

            let fourth = try RawHTTPConnection(port: port)
            try fourth.send("POST /small HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\n\r\n0123456789abcdef")
            let atLimit = try fourth.readResponse()
            try fourth.send("GET /again HTTP/1.1\r\nHost: x\r\n\r\n")  // still keep-alive
            _ = try fourth.readResponse()
            return (declared, chunked, async, atLimit)
        }
        #expect(declared.status == 413)
        #expect(chunked.status == 413)
        #expect(async.status == 413)
        #expect(atLimit.status == 200)
        let requests = Dictionary(log.all.map { ($0.path, $0) }, uniquingKeysWith: { first, _ in first })
        for path in ["/declared", "/chunked", "/async"] {
            #expect(requests[path]?.bodyExceededLimit == true, "\(path)")
            #expect(requests[path]?.body.isEmpty == true, "\(path)")
        }
        #expect(requests["/small"]?.bodyExceededLimit == false)
        #expect(requests["/small"]?.body == Array("0123456789abcdef".utf8))
        #expect(log.all.count == 5)
    }

    @Test("keep-alive: several requests, immediate and async, on one connection")
    func keepAlive() async throws {
        let server = try startServer(
            ClosureHandler(
                immediate: { request in
                    request.path == "/fast" ? HTTPResponse(status: 200, body: Array("fast".utf8)) : nil
                },
                async: { _ in
                    await Task.yield()
                    return HTTPResponse(status: 200, body: Array("slow".utf8))
                }))
        defer { server.stop() }
        let port = server.port
        let texts = try await onOwnThread {
            let connection = try RawHTTPConnection(port: port)
            var texts: [String] = []
            for path in ["/fast", "/slow", "/slow", "/fast"] {
                try connection.send("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
                let response = try connection.readResponse()
                texts.append(response.text)
            }
            return texts
        }
        #expect(texts == ["fast", "slow", "slow", "fast"])
    }

    @Test("bodies small and large, sent from their own storage, arrive byte for byte, immediate and async, one after another on a connection")
    func bodiesOfEverySizeArriveIntact() async throws {
        // Distinct bytes per size and position, so a body sent from freed or reused storage shows.
        @Sendable func body(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ count) } }
        let sizes = [0, 1, 1023, 1024, 2_500, 300_000]
        let server = try startBodyServer(body)
        defer { server.stop() }
        let port = server.port
        let paths = sizes.flatMap { ["/now/\($0)", "/later/\($0)"] }
        let bodies = try await onOwnThread {
            let connection = try RawHTTPConnection(port: port)
            var bodies: [[UInt8]] = []
            for path in paths + paths.reversed() {
                try connection.send("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
                bodies.append(try connection.readResponse().body)
            }
            try connection.send("HEAD /now/300000 HTTP/1.1\r\nHost: x\r\n\r\n")
            let head = try connection.readResponse(hasBody: false)
            return (bodies, head)
        }
        let expected = (sizes.flatMap { [$0, $0] } + sizes.flatMap { [$0, $0] }.reversed()).map(body)
        #expect(bodies.0.count == expected.count)
        for (got, want) in zip(bodies.0, expected) { #expect(got == want, "a body of \(want.count) bytes") }
        #expect(bodies.1.status == 200 && bodies.1.body.isEmpty && bodies.1.header("content-length") == "300000")
    }

    @Test("answers written into reused body buffers on many connections at once each arrive with their own bytes")
    func reusedBuffersCarryTheirOwnAnswer() async throws {
        // Each answer is written into a buffer a sent answer gave back, as the token route does:
        // one given back before its answer was sent would show here as another request's bytes.
        @Sendable func body(_ id: Int) -> [UInt8] {
            var out = BodyBuffers.shared.take()
            for index in 0..<2_500 { out.append(UInt8(truncatingIfNeeded: index &* 7 &+ id)) }
            return out
        }
        let server = try startBodyServer(body)
        defer { server.stop() }
        let port = server.port
        let mismatches = try await withThrowingTaskGroup(of: Int.self) { group in
            for connectionIndex in 0..<8 {
                group.addTask {
                    try await onOwnThread {
                        let connection = try RawHTTPConnection(port: port)
                        var mismatches = 0
                        for request in 0..<40 {
                            let id = connectionIndex * 1_000 + request
                            try connection.send("GET \(request % 2 == 0 ? "/now" : "/later")/\(id) HTTP/1.1\r\nHost: x\r\n\r\n")
                            if try connection.readResponse().body != body(id) { mismatches += 1 }
                        }
                        return mismatches
                    }
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(mismatches == 0)
    }

    @Test("keep-alive: each request on a connection sees its own header fields and body, never the previous request's")
    func keepAliveRequestsAreSeparate() async throws {
        // A connection reuses its request context and buffers (ConnectionSlot): a field, a body
        // or a refusal of one request must not show in the next, immediate or async.
        let log = RequestLog()
        let server = try startServer(
            ClosureHandler(
                immediate: { request in
                    log.record(request)
                    return request.path == "/fast" ? HTTPResponse(status: 200, body: request.body) : nil
                },
                async: { request in HTTPResponse(status: 200, body: request.body) }))
        defer { server.stop() }
        let port = server.port
        let texts = try await onOwnThread {
            let connection = try RawHTTPConnection(port: port)
            var texts: [String] = []
            let long = String(repeating: "v", count: 300)
            try connection.send("POST /fast HTTP/1.1\r\nHost: x\r\nX-First: \(long)\r\nContent-Length: 5\r\n\r\nfirst")
            texts.append(try connection.readResponse().text)
            try connection.send("POST /slow HTTP/1.1\r\nHost: y\r\nContent-Length: 2\r\n\r\nab")
            texts.append(try connection.readResponse().text)
            try connection.send("GET /fast HTTP/1.1\r\nHost: z\r\n\r\n")
            texts.append(try connection.readResponse().text)
            return texts
        }
        #expect(texts == ["first", "ab", ""])
        let requests = log.all
        try #require(requests.count == 3)
        #expect(requests[0].headers["X-First"]?.utf8.count == 300)
        #expect(requests[1].headers["X-First"] == nil)
        #expect(requests[1].headers.count == 2)
        #expect(requests[1].headers["host"] == "y")
        #expect(requests[2].headers.count == 1)
        #expect(requests[2].headers["Host"] == "z")
        #expect(requests[2].body.isEmpty)
        // What the first request's handler kept is still its own.
        #expect(requests[0].body == Array("first".utf8))
        #expect(requests[0].headers["Host"] == "x")
    }

    @Test("stop() closes suspended connections, drops late responses, and refuses new connections")
    func stopWhileAsyncHandlerRuns() async throws {
        let gate = Gate()
        let server = try startServer(
            ClosureHandler(async: { _ in
                await gate.wait()
                return HTTPResponse(status: 200)
            }))
        let port = server.port
        let connection = try RawHTTPConnection(port: port)
        try connection.send("GET /waits HTTP/1.1\r\nHost: x\r\n\r\n")
        let deadline = ContinuousClock.now + .seconds(5)
        while gate.entered == 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(gate.entered == 1)
        server.stop()
        server.stop()  // idempotent
        let closed = await onOwnThread { connection.isClosedByPeer() }
        #expect(closed)
        gate.open()  // the handler now returns into a stopped server: dropped, no crash
        try await Task.sleep(for: .milliseconds(50))
        #expect(throws: RawHTTPConnection.Failure.self) { try RawHTTPConnection(port: port) }
    }

    @Test("starting on a port already bound throws address in use, naming MHD_start_daemon")
    func portInUse() throws {
        let first = try startServer(ClosureHandler())
        defer { first.stop() }
        let second = HTTPServer(configuration: HTTPServerConfiguration(port: first.port), handler: ClosureHandler())
        let error = try #require(throws: HTTPServerError.self) { try second.start() }
        #expect(error.isAddressInUse)
        #expect(error.description.contains("MHD_start_daemon"))
        #expect(throws: HTTPServerError.self) { try first.start() }  // a server starts once
    }

    @Test("an unparsable host is a configuration error")
    func invalidHost() {
        let server = HTTPServer(configuration: HTTPServerConfiguration(host: "not an address", port: 0), handler: ClosureHandler())
        #expect(throws: HTTPServerError.self) { try server.start() }
    }

    @Test("listens on IPv6 loopback")
    func ipv6() async throws {
        let server = try startServer(
            ClosureHandler(immediate: { request in
                HTTPResponse(status: 200, body: Array((request.remoteAddress ?? "none").utf8))
            }), host: "::1")
        defer { server.stop() }
        let port = server.port
        let response = try await onOwnThread {
            let connection = try RawHTTPConnection(port: port, host: "::1")
            try connection.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            return try connection.readResponse()
        }
        #expect(response.text == "::1")
    }
}
