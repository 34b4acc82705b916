import Foundation
import HTTPCommon
import HTTPServerBridge
import Synchronization
import Testing
import TokenRelayTesting

/// A person's sign-in in a real browser (issue 29 item 1; behaviour §3.2–§3.3): headless
/// chromium (Debian's `chromium` and `chromium-driver`, installed by scripts/install-deps)
/// driven by Selenium (scripts/python-tools) through Tests/browser/browser_sign_in.py against a
/// real stack: the emulator's sign-in page, the callback, `redirect_after` (a page served here),
/// a dead refresh token's `sign_in_url` followed to recovery, a used link and a cancel, each
/// seen as a person sees it. A failing case leaves a screenshot of every page it saw under
/// `TOKENRELAY_TEST_LOG_DIR/browser-*` (`make test`: .build/test-logs).
@Suite("A sign-in in a real browser", .serialized, .timingGroup(.heavy))
struct BrowserSignInTests {
    /// The application `redirect_after` points at: answers every GET with a small page and
    /// records the paths and queries it was asked for.
    final class LandingPage: HTTPHandler {
        private let visits = Mutex<[String]>([])
        var visited: [String] { visits.withLock { $0 } }

        func respondImmediately(to request: HTTPRequest) -> HTTPFirstStep<HTTPRequest> {
            let query = request.query.map { "\($0.name)=\($0.value)" }.joined(separator: "&")
            // A browser also asks for /favicon.ico: not a visit of the application.
            if request.path != "/favicon.ico" { visits.withLock { $0.append(request.path + (query.isEmpty ? "" : "?" + query)) } }
            let html = "<!doctype html><title>The application</title><h1 id=\"landed\">Back in the application</h1>"
            return .respond(HTTPResponse(status: 200, headers: ["Content-Type": "text/html; charset=utf-8"], body: Array(html.utf8)))
        }

        func respond(to request: HTTPRequest) async -> HTTPResponse { HTTPResponse(status: 500) }
    }

    /// Runs `browser_sign_in.py case` against a fresh stack whose `redirect_after` origin is a
    /// ``LandingPage``; returns the exit status, the output, the landing page's visits and the
    /// screenshot directory.
    static func run(_ name: String, case scenario: String) async throws -> (status: Int32, output: String, visits: [String], shots: String) {
        let bin = try #require(
            ProcessInfo.processInfo.environment["TOKENRELAY_TEST_PYTHON_BIN"],
            "set TOKENRELAY_TEST_PYTHON_BIN to the bin directory printed by scripts/python-tools (make test does)")
        let landing = LandingPage()
        let server = HTTPServer(configuration: HTTPServerConfiguration(host: "127.0.0.1", port: 0, threadCount: 1), handler: landing)
        try server.start()
        defer { server.stop() }
        let origin = "http://127.0.0.1:\(server.port)"
        let stack = try await TokenRelayStack(name: name, environment: ["TOKENRELAY_REDIRECT_AFTER_ORIGINS": origin])
        defer { stack.stop() }
        let shots = TestLogs.directory + "/browser-\(scenario)-\(UUID().uuidString.prefix(8))"
        let (status, output) = try await GeneratedClientTests.run(
            bin + "/python", [BuiltProducts.packageRoot() + "/Tests/browser/browser_sign_in.py", scenario],
            environment: [
                "TR_BASE_URL": stack.baseURL, "TR_API_KEY": stack.apiKey, "TR_EMULATOR_URL": stack.emulatorBaseURL, "TR_LANDING_URL": origin,
                "TR_SCREENSHOT_DIR": shots,
            ])
        #expect(!output.contains(stack.apiKey), "the script printed the API key")
        return (status, output, landing.visited, shots)
    }

    @Test(
        "Chromium signs a user in on the emulator's page and lands on redirect_after, follows a sign_in_url to recovery, sees a used link's page, cancels and goes back to redirect_after"
    )
    func signInRecoverCancel() async throws {
        let (status, output, visits, shots) = try await Self.run("e2e_browser_sign_in", case: "flow")
        #expect(status == 0, "browser sign-in failed (screenshots under \(shots)):\n\(output)")
        #expect(output.contains("browser sign-in: ok"), "\(output)")
        #expect(visits.count == 2, "\(visits)")
        #expect(visits.first?.hasPrefix("/signed-in?from=browser&account_id=acc_") == true, "\(visits)")
        #expect(visits.last == "/after?error=user_canceled", "\(visits)")
    }

    @Test("A page that fails the test leaves a screenshot of each page seen, and the last page's HTML")
    func failingPageLeavesScreenshot() async throws {
        let (status, output, _, shots) = try await Self.run("e2e_browser_sign_in_broken", case: "broken")
        #expect(status == 1, "the broken case fails on purpose:\n\(output)")
        #expect(output.contains("a tampered link (fails on purpose)"), "\(output)")
        let files = (try? FileManager.default.contentsOfDirectory(atPath: shots).sorted()) ?? []
        #expect(files == ["01-sign-in-page.png", "02-tampered-link.png", "03-at-failure.png", "last-page.html"], "\(files)")
        let png = FileManager.default.contents(atPath: shots + "/02-tampered-link.png") ?? Data()
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "a PNG of \(png.count) bytes")
        let page = (try? String(contentsOfFile: shots + "/last-page.html", encoding: .utf8)) ?? ""
        #expect(page.contains("id=\"error\">invalid_request<"), "the tampered link's page, readable: \(page.prefix(300))")
    }
}
