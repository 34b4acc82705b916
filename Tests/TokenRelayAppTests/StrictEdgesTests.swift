import HTTPCommon
import IdentityCore
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

/// The relay's own checks of what it passes on (issue 32, "Strict at the edges"; behaviour §6.2,
/// §6.3), below the HTTP layer, which refuses CR and NUL in any header already.
@Suite("Strict at the edges: the relay's path segments and forwarded headers")
struct StrictEdgesTests {
    @Test(
        "Dot segments once ';' parameters and '\\' are considered",
        arguments: ["..", ".", "..;", "..;x", ".;", "..\\beta", "me\\..", "a\\.\\b", "..;/"]
    )
    func dotSegments(segment: String) {
        #expect(DownstreamService.isDotSegment(Substring(segment)))
    }

    @Test("Ordinary segments stay", arguments: ["me", "...", "..x", "x..", ";..", "a;b", "me;x=..", "$batch", "users('a..b')"])
    func ordinarySegments(segment: String) {
        #expect(!DownstreamService.isDotSegment(Substring(segment)))
    }

    @Test("A forwarded header with a control character but HTAB (CR, LF, NUL, ESC, DEL, ...) is 400 naming it; others pass")
    func forwardedHeaders() throws {
        for bad in ["a\rX-Injected: 1", "a\nb", "a\u{0}b", "ev\u{1}entual", "a\u{1B}[2J", "a\u{7F}", "\u{1F}"] {
            let headers: HTTPHeaders = ["Accept": "application/json", "Prefer": bad]
            #expect(throws: RelayError.self) { try DownstreamService.checkForwardedHeaders(headers) }
            do {
                try DownstreamService.checkForwardedHeaders(headers)
            } catch {
                #expect(error.extensions["field"] == .string("Prefer"))
                #expect(error.status == 400)
            }
        }
        try DownstreamService.checkForwardedHeaders(["Prefer": "odata.maxpagesize=10", "ConsistencyLevel": "even\ttual", "X-Other": "a\rb"])
    }
}
