import Foundation
import HTTPCommon
import Synchronization

/// A minimal HTTP/1.1 server on a loopback port of its own, for the client tests.
///
/// POSIX sockets and a thread per connection: enough to see exactly what the client sent, count
/// TCP connections, and misbehave on purpose (never answer, interim 100, chunked bodies).
final class HTTPClientTestPeer: Sendable {
    struct Request: Sendable {
        var method: String
        var target: String
        var headers: HTTPHeaders
        var body: [UInt8]
        /// 1-based number of the TCP connection it came on.
        var connection: Int
    }

    struct Response: Sendable {
        var status: Int = 200
        var headers: [(String, String)] = []
        var body: [UInt8] = []
        /// Send the body with chunked transfer coding instead of Content-Length.
        var chunked = false
        /// Send `100 Continue` (with a header of its own) before the final response.
        var interimContinue = false
    }

    enum Reply: Sendable {
        case respond(Response)
        /// Read the request, never answer; the connection stays open until the client closes it.
        case never
    }

    private struct State {
        var connections = 0
        var requests: [Request] = []
        var openSockets: Set<Int32> = []
        var stopped = false
    }

    let port: Int
    private let listener: Int32
    private let handler: @Sendable (Request) -> Reply
    private let state = Mutex(State())

    init(handler: @escaping @Sendable (Request) -> Reply) throws {
        self.handler = handler
        let (socket, port) = try Self.listen()
        listener = socket
        self.port = port
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    deinit { stop() }

    var connectionCount: Int { state.withLock { $0.connections } }
    var requests: [Request] { state.withLock { $0.requests } }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    func stop() {
        // Under the lock: a connection's socket leaves the set and is closed under it too, so no
        // number shut down here can already belong to another test's descriptor.
        state.withLock { state in
            guard !state.stopped else { return }
            state.stopped = true
            _ = Glibc.shutdown(listener, Int32(SHUT_RDWR))  // unblocks accept()
            for socket in state.openSockets { _ = Glibc.shutdown(socket, Int32(SHUT_RDWR)) }
        }
    }

    /// A port on which nothing listens (bound, then closed).
    static func closedPort() throws -> Int {
        let (socket, port) = try listen()
        close(socket)
        return port
    }

    /// A listening socket that never accepts: the kernel completes the handshake and buffers the
    /// request, no answer ever comes.
    static func silentListener() throws -> (socket: Int32, port: Int) { try listen() }

    private static func listen() throws -> (Int32, Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, Glibc.listen(fd, 1024) == 0 else {
            close(fd)
            throw POSIXError(.init(rawValue: errno) ?? .EIO)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                break
            }
            let number: Int? = state.withLock { state in
                guard !state.stopped else { return nil }
                state.connections += 1
                state.openSockets.insert(client)
                return state.connections
            }
            guard let number else {
                close(client)
                break
            }
            let thread = Thread { [self] in serve(client, connection: number) }
            thread.start()
        }
        close(listener)
    }

    private func serve(_ socket: Int32, connection: Int) {
        defer {
            state.withLock { state in
                _ = state.openSockets.remove(socket)
                close(socket)
            }
        }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            // Parse as many complete requests as the buffer holds.
            while let (request, consumed) = parse(buffer, connection: connection) {
                buffer.removeFirst(consumed)
                state.withLock { $0.requests.append(request) }
                switch handler(request) {
                case .never:
                    while recv(socket, &chunk, chunk.count, 0) > 0 {}
                    return
                case .respond(let response):
                    guard write(response, to: socket) else { return }
                    if request.headers["Connection"]?.lowercased() == "close" { return }
                }
            }
            let count = recv(socket, &chunk, chunk.count, 0)
            if count <= 0 { return }
            buffer.append(contentsOf: chunk[0..<count])
        }
    }

    private func parse(_ buffer: [UInt8], connection: Int) -> (Request, Int)? {
        let terminator: [UInt8] = [13, 10, 13, 10]
        guard let end = buffer.firstRange(of: terminator) else { return nil }
        let head = String(decoding: buffer[..<end.lowerBound], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let requestLine = lines.removeFirst().split(separator: " ")
        guard requestLine.count == 3 else { return nil }
        var headers = HTTPHeaders()
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.add(String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let length = Int(headers["Content-Length"] ?? "0") ?? 0
        let bodyStart = end.upperBound
        guard buffer.count >= bodyStart + length else { return nil }
        let request = Request(
            method: String(requestLine[0]), target: String(requestLine[1]), headers: headers,
            body: Array(buffer[bodyStart..<bodyStart + length]), connection: connection)
        return (request, bodyStart + length)
    }

    private func write(_ response: Response, to socket: Int32) -> Bool {
        var out: [UInt8] = []
        if response.interimContinue { out += Array("HTTP/1.1 100 Continue\r\nX-Interim: yes\r\n\r\n".utf8) }
        var head = "HTTP/1.1 \(response.status) Status\r\n"
        for (name, value) in response.headers { head += "\(name): \(value)\r\n" }
        if response.chunked {
            head += "Transfer-Encoding: chunked\r\n\r\n"
            out += Array(head.utf8)
            if !response.body.isEmpty {
                out += Array((String(response.body.count, radix: 16) + "\r\n").utf8) + response.body + [13, 10]
            }
            out += Array("0\r\n\r\n".utf8)
        } else {
            head += "Content-Length: \(response.body.count)\r\n\r\n"
            out += Array(head.utf8) + response.body
        }
        var offset = 0
        while offset < out.count {
            let sent = out[offset...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }
}
