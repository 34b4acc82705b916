import Foundation
import Glibc
import Testing
import TokenRelayTesting

/// behaviour §7 Limits through the real binary: body size, header size, connection count, and the
/// inactivity timeout that cuts off a client that stops sending.
@Suite("Connection limits", .serialized, .timingGroup(.measuring))
struct ConnectionLimitsTests {
    /// One TCP connection with a receive timeout, to send partial requests. Its blocking reads
    /// run on a thread of their own (``onOwnThread(_:)``): a read waiting seconds for a timeout on
    /// one of the two task-pool threads stalled other tests' async work in the same process.
    /// `@unchecked Sendable`: a test uses it from one task at a time.
    final class RawSocket: @unchecked Sendable {
        let fd: Int32

        init(port: Int) throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard result == 0 else { throw TestFailure("connect: errno \(errno)") }
        }

        deinit { close(fd) }

        func send(_ text: String) {
            _ = Array(text.utf8).withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }

        enum Received: Equatable {
            case bytes(String)
            case closed
            case nothing
        }

        /// What arrives within `seconds`: bytes, the server closing (EOF or reset), or nothing.
        func receive(within seconds: Double) async -> Received {
            await onOwnThread { self.receiveBlocking(within: seconds) }
        }

        private func receiveBlocking(within seconds: Double) -> Received {
            var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1e6))
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 65536)
            let count = recv(fd, &buffer, buffer.count, 0)
            if count > 0 { return .bytes(String(decoding: buffer[..<count], as: UTF8.self)) }
            if count == 0 || errno == ECONNRESET { return .closed }
            return .nothing
        }
    }

    static func port(_ stack: TokenRelayStack) throws -> Int {
        guard let port = stack.baseURL.split(separator: ":").last.flatMap({ Int($0) }) else { throw TestFailure("no port in \(stack.baseURL)") }
        return port
    }

    @Test("A body over TOKENRELAY_MAX_BODY_BYTES is 413 payload_too_large; headers past the connection memory get the HTTP layer's 431")
    func bodyAndHeaderSize() async throws {
        let stack = try await TokenRelayStack(name: "e2e_limits_size", environment: ["TOKENRELAY_MAX_BODY_BYTES": "2048"])
        defer { stack.stop() }
        let big = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": String(repeating: "a", count: 4096), "scopes": ["User.Read"]])
        #expect(big.status == 413)
        #expect(big.json["error"] as? String == "payload_too_large")
        #expect(big.headers["Content-Type"] == "application/problem+json")
        let fits = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": String(repeating: "a", count: 1024), "scopes": ["User.Read"]])
        #expect(fits.status == 404)

        // Headers past the connection's memory: the HTTP layer's own 431, and the server goes on.
        let socket = try RawSocket(port: try Self.port(stack))
        socket.send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 40000))\r\n\r\n")
        guard case .bytes(let answer) = await socket.receive(within: 5) else {
            Issue.record("no answer to oversized headers")
            return
        }
        #expect(answer.hasPrefix("HTTP/1.1 431"), "\(answer.prefix(80))")
        #expect(answer.contains("Connection: close"))
        #expect(try await stack.request("GET", "/healthz", authenticated: false).status == 200)
    }

    /// The status line and the value of `Content-Type` and of the problem's `field`, of the answer
    /// to `head` on a new connection; nil when the connection closed without an answer.
    static func answer(port: Int, _ head: String) async throws -> (status: String, contentType: String?, field: String?)? {
        let socket = try RawSocket(port: port)
        socket.send(head)
        guard case .bytes(let text) = await socket.receive(within: 5) else { return nil }
        let lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        let contentType = lines.first { $0.lowercased().hasPrefix("content-type:") }.map { $0.dropFirst(13).trimmingCharacters(in: .whitespaces) }
        let field = text.range(of: #""field":""#).map { String(text[$0.upperBound...].prefix { $0 != "\"" }) }
        return (String(lines.first?.prefix(12) ?? ""), contentType, field)
    }

    @Test("A request target over 8 KiB is 414 and header fields over 12 KiB are 431, problem+json, at every size the connection holds")
    func oversizedHeadsAreProblems() async throws {
        let stack = try await TokenRelayStack(name: "e2e_limits_head")
        defer { stack.stop() }
        let port = try Self.port(stack)
        // "/v1/events?x=" is 13 bytes of target with "?" and "=" counted: 8192 in all is the last that passes.
        for (length, expected) in [(8192 - 13, "HTTP/1.1 401"), (8192 - 12, "HTTP/1.1 414")] {
            let answer = try await Self.answer(port: port, "GET /v1/events?x=\(String(repeating: "q", count: length)) HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(answer?.status == expected, "target \(length)")
        }
        // "Host: x" counts 9 bytes with ": " and CRLF, "X-Big: …" 9 plus its value: 12288 in all is the last that passes.
        for (length, expected) in [(12288 - 18, "HTTP/1.1 200"), (12288 - 17, "HTTP/1.1 431")] {
            let answer = try await Self.answer(port: port, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "h", count: length))\r\n\r\n")
            #expect(answer?.status == expected, "headers \(length)")
        }
        // Past the limits, every size up to 23 KiB of head gets TokenRelay's own answer: never a
        // bare page, never a closed connection (libmicrohttpd closed heads within ~400 bytes of its 16 KiB).
        for length in stride(from: 8500, through: 23_400, by: 200) {
            let answer = try await Self.answer(port: port, "GET /v1/events?x=\(String(repeating: "q", count: length)) HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(answer?.status == "HTTP/1.1 414" && answer?.contentType == "application/problem+json", "target \(length): \(String(describing: answer))")
        }
        for length in stride(from: 12_500, through: 23_400, by: 200) {
            let answer = try await Self.answer(port: port, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "h", count: length))\r\n\r\n")
            #expect(answer?.status == "HTTP/1.1 431" && answer?.contentType == "application/problem+json", "headers \(length): \(String(describing: answer))")
            #expect(answer?.field == "X-Big", "headers \(length)")
        }
        // Content-Length fields that disagree: 400 naming the field, the connection closed (it
        // was answered by the first, a request-smuggling risk behind a proxy that used the other).
        let conflicting = try await Self.answer(
            port: port, "POST /v1/tokens/silent HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\n{}   ")
        #expect(conflicting?.status == "HTTP/1.1 400" && conflicting?.field == "Content-Length", "\(String(describing: conflicting))")
        let repeated = try await Self.answer(
            port: port, "POST /v1/tokens/silent HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}")
        #expect(repeated?.status == "HTTP/1.1 401", "the same value twice is one length: \(String(describing: repeated))")
        let text = try await stack.request("GET", "/v1/events?x=" + String(repeating: "q", count: 9000))
        #expect(text.status == 414 && text.json["error"] as? String == "uri_too_long", "\(text.text.prefix(200))")
        #expect(try await stack.request("GET", "/healthz", authenticated: false).status == 200)
    }

    @Test(
        "Host and the request target as RFC 9112 has them (new-user attack): no Host on HTTP/1.1 or two are 400 naming Host, so is a space before a colon; an absolute-form target is routed by its path; Allow lists HEAD with GET"
    )
    func hostAndRequestTargets() async throws {
        let stack = try await TokenRelayStack(name: "e2e_limits_host")
        defer { stack.stop() }
        let port = try Self.port(stack)
        for head in ["GET /healthz HTTP/1.1\r\n\r\n", "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"] {
            let answer = try await Self.answer(port: port, head)
            #expect(
                answer?.status == "HTTP/1.1 400" && answer?.contentType == "application/problem+json" && answer?.field == "Host",
                "\(head): \(String(describing: answer))")
        }
        // Whitespace between a field name and its colon (RFC 9112 §5.1: MUST be 400); it was read as
        // another field, so `Authorization : Bearer …` answered 401.
        let spaced = try await Self.answer(port: port, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Test : 1\r\n\r\n")
        #expect(spaced?.status == "HTTP/1.1 400" && spaced?.field == "X-Test", "\(String(describing: spaced))")
        // HTTP/1.0 has no Host requirement.
        #expect(try await Self.answer(port: port, "GET /healthz HTTP/1.0\r\n\r\n")?.status == "HTTP/1.1 200")
        // It was 404 "No route matches GET http://…/healthz"; a server must accept the absolute form (§3.2.2).
        for target in ["http://127.0.0.1:\(port)/healthz", "HTTPS://relay.example/healthz"] {
            let answer = try await Self.answer(port: port, "GET \(target) HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(answer?.status == "HTTP/1.1 200", "\(target): \(String(describing: answer))")
        }
        #expect(try await Self.answer(port: port, "GET http://relay.example HTTP/1.1\r\nHost: x\r\n\r\n")?.status == "HTTP/1.1 404")
        let options = try await stack.request("OPTIONS", "/healthz", authenticated: false)
        #expect(options.status == 405 && options.headers["Allow"] == "GET, HEAD", "\(options.headers)")
    }

    @Test("A client that stops sending, or trickles its headers or its body, is cut off after TOKENRELAY_CLIENT_TIMEOUT_S")
    func slowClientTimeout() async throws {
        let stack = try await TokenRelayStack(name: "e2e_limits_timeout", environment: ["TOKENRELAY_CLIENT_TIMEOUT_S": "1"])
        defer { stack.stop() }
        let socket = try RawSocket(port: try Self.port(stack))
        socket.send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Partial: ")
        let started = ContinuousClock.now
        #expect(await socket.receive(within: 0.4) == .nothing, "cut off before the timeout")
        #expect(await socket.receive(within: 5) == .closed)
        #expect(started.duration(to: .now) < .seconds(4))
        // An idle keep-alive connection is closed the same way.
        let idle = try RawSocket(port: try Self.port(stack))
        idle.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        guard case .bytes(let answer) = await idle.receive(within: 5) else {
            Issue.record("no answer")
            return
        }
        #expect(answer.hasPrefix("HTTP/1.1 200"))
        #expect(await idle.receive(within: 5) == .closed)

        // Sends `start`, then a piece every 0.3 s (never silent for a whole second) until the
        // server closes; returns what it saw last and how long the trickle lasted.
        func trickle(_ start: String, _ piece: (Int) -> String) async throws -> (RawSocket.Received, Duration) {
            let socket = try RawSocket(port: try Self.port(stack))
            socket.send(start)
            let started = ContinuousClock.now
            var outcome = RawSocket.Received.nothing
            for index in 0..<40 where outcome == .nothing {
                socket.send(piece(index))
                outcome = await socket.receive(within: 0.3)
            }
            return (outcome, started.duration(to: .now))
        }
        // A client trickling its headers is cut off too.
        let (outcome, elapsed) = try await trickle("GET /healthz HTTP/1.1\r\nHost: x\r\n") { "X-Slow-\($0): y\r\n" }
        #expect(outcome == .closed, "a trickling client kept its connection: \(outcome)")
        #expect(elapsed > .milliseconds(900) && elapsed < .seconds(4), "\(elapsed)")
        // So is one trickling its body: it used to be answered after the last byte, 138 s for 70
        // bytes one every 2 s (only silence and the head had a deadline).
        let (bodyOutcome, bodyElapsed) = try await trickle(
            "POST /v1/tokens/silent HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n"
        ) { _ in "{" }
        #expect(bodyOutcome == .closed, "a client trickling its body kept its connection: \(bodyOutcome)")
        #expect(bodyElapsed > .milliseconds(900) && bodyElapsed < .seconds(4), "\(bodyElapsed)")
        #expect(try await stack.request("GET", "/healthz", authenticated: false).status == 200)
    }

    @Test("Past TOKENRELAY_MAX_CONNECTIONS a new connection waits unserved until one closes")
    func connectionLimit() async throws {
        let stack = try await TokenRelayStack(
            name: "e2e_limits_connections", environment: ["TOKENRELAY_MAX_CONNECTIONS": "3", "TOKENRELAY_SERVER_THREADS": "1"])
        defer { stack.stop() }
        let port = try Self.port(stack)
        var held: [RawSocket] = []
        for _ in 0..<3 {
            let socket = try RawSocket(port: port)
            socket.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            guard case .bytes(let answer) = await socket.receive(within: 5), answer.hasPrefix("HTTP/1.1 200") else {
                Issue.record("a connection under the limit was not served")
                return
            }
            held.append(socket)
        }
        let extra = try RawSocket(port: port)
        extra.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        let refused = await extra.receive(within: 1)
        #expect(refused == .nothing || refused == .closed, "a fourth connection was served: \(refused)")
        held.removeAll()
        if refused == .nothing {
            guard case .bytes(let answer) = await extra.receive(within: 5) else {
                Issue.record("the waiting connection was not served after others closed")
                return
            }
            #expect(answer.hasPrefix("HTTP/1.1 200"))
        }
        let after = try RawSocket(port: port)
        after.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        guard case .bytes(let answer) = await after.receive(within: 5) else {
            Issue.record("not served after the held connections closed")
            return
        }
        #expect(answer.hasPrefix("HTTP/1.1 200"))
    }
}
