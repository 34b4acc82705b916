import Foundation
import Glibc
import HTTPCommon
import HTTPServerBridge
import Testing
import TokenRelayTesting

/// What libmicrohttpd 0.9.75's `MHD_OPTION_STRICT_FOR_CLIENT` changes, measured (behaviour §7.4),
/// and the server's own head rules, which hold in either mode.
@Suite("libmicrohttpd strict client mode, measured", .serialized)
struct StrictClientTests {
    /// What a fresh connection gets for `bytes`: the first status line, "closed" (closed without
    /// an answer) or "nothing" (no answer within a second).
    static func outcome(_ port: Int, _ bytes: String) -> String {
        guard let socket = try? RawHTTPConnection(port: port) else { return "connect failed" }
        try? socket.send(bytes)
        guard let response = try? socket.readResponse() else { return socket.isClosedByPeer() ? "closed" : "nothing" }
        return "\(response.status) \(response.header("Content-Type") ?? "")"
    }

    static let heads: [(String, String)] = [
        ("space in the target", "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("no Host", "GET / HTTP/1.1\r\n\r\n"),
        ("space before a colon", "GET / HTTP/1.1\r\nHost: x\r\nX-A : 1\r\n\r\n"),
        ("obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n 2\r\n\r\n"),
        ("bare LF", "GET / HTTP/1.1\nHost: x\n\n"),
        ("both framing headers", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("unknown coding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
        ("chunked on HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("NUL in a value", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\u{0}b\r\n\r\n"),
        ("CR in a value", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n"),
        ("Expect: foo", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: foo\r\n\r\n{}"),
        ("well-formed", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
    ]

    @Test(
        "Strict mode 1 closes on a space in the target and answers a missing Host with its own bare 400; every other case is answered the same, by the server's own rules (mode 0 is kept)"
    )
    func strictModeDifferences() async throws {
        let handler = ClosureHandler(immediate: { request in
            // The application's own rule for Host, as TokenRelay has it.
            request.version == "HTTP/1.1" && request.headers["Host"] == nil
                ? HTTPResponse(status: 400, headers: ["Content-Type": "application/problem+json"])
                : HTTPResponse(status: 200, headers: ["Content-Type": "text/plain"])
        })
        var results: [Int: [String: String]] = [:]
        for strict in [0, 1] {
            let server = HTTPServer(
                configuration: HTTPServerConfiguration(host: "127.0.0.1", port: 0, threadCount: 1, strictForClient: strict), handler: handler)
            try server.start()
            let port = server.port
            results[strict] = await onOwnThread { Dictionary(uniqueKeysWithValues: Self.heads.map { ($0.0, Self.outcome(port, $0.1)) }) }
            server.stop()
        }
        for (name, _) in Self.heads { print("strict-for-client: \(name): 0 → \(results[0]?[name] ?? "?"), 1 → \(results[1]?[name] ?? "?")") }
        let lenient = try #require(results[0]), strict = try #require(results[1])
        // Measured differences (libmicrohttpd 0.9.75).
        // A space in the target: refused by the server's own rule (400) in mode 0; libmicrohttpd
        // closes the connection first in mode 1 (before the server's rule, it read `/a b`).
        #expect(lenient["space in the target"]?.hasPrefix("400 text/plain") == true)
        #expect(strict["space in the target"] == "closed")
        // No Host: the application's answer in mode 0, libmicrohttpd's bare page (no media type) in mode 1.
        #expect(lenient["no Host"] == "400 application/problem+json")
        #expect(strict["no Host"] == "400 ")
        // Everything else is the server's own refusal (or answer), in either mode.
        for (name, _) in Self.heads where !["space in the target", "no Host"].contains(name) {
            #expect(lenient[name] == strict[name], "\(name)")
        }
        for name in ["obs-fold", "bare LF", "both framing headers", "chunked on HTTP/1.0", "NUL in a value", "CR in a value"] {
            #expect(lenient[name]?.hasPrefix("400 ") == true, "\(name): \(lenient[name] ?? "")")
        }
        #expect(lenient["unknown coding"]?.hasPrefix("501 ") == true)
        #expect(lenient["Expect: foo"]?.hasPrefix("417 ") == true)
        #expect(lenient["space before a colon"] == "200 text/plain", "the application refuses it by its name (TokenRelay: RequestHeadLimits)")
    }
}
