import CryptoBridge
import Foundation
import HTTPClientBridge
import Testing
import TokenRelayTesting

/// behaviour §3.2: the HTML pages a person's browser gets (the callback's signed-in page, a
/// problem as a page on the callback and on signed sign-in links) may not be framed by another
/// site nor read as another type, and load nothing but their own inline style. They carried no
/// such header (attack report 42, defect 14: the signed-in page could be framed, clickjacking).
@Suite("The pages for a person's browser refuse frames and sniffing", .serialized)
struct BrowserPageHeadersTests {
    static let html = ["Accept": "text/html,application/xhtml+xml,*/*;q=0.8"]

    @Test("Every HTML answer carries CSP frame-ancestors 'none' allowing only its inline style, X-Frame-Options DENY and nosniff")
    func pagesRefuseFramesAndSniffing() async throws {
        let stack = try await TokenRelayStack(name: "e2e_browser_page_headers")
        defer { stack.stop() }
        let started = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": "alice@contoso.example"])
        let authorize = try #require(started.json["authorize_url"] as? String, "\(started.text)")
        let redirect = try await stack.browser.execute(HTTPClientRequest(method: "GET", url: authorize))
        let callback = try #require(redirect.headers["Location"], "authorize answered \(redirect.status)")
        // The signed-in page, the same callback again (its state used: a problem page), a sign-in link that is not one.
        let signedIn = try await stack.request("GET", callback, headers: Self.html, authenticated: false)
        let usedAgain = try await stack.request("GET", callback, headers: Self.html, authenticated: false)
        let notALink = try await stack.request("GET", "/v1/sign-ins/start?sig=x", headers: Self.html, authenticated: false)
        #expect(signedIn.status == 200 && usedAgain.status == 400, "\(signedIn.status) \(usedAgain.status)")
        let pages = [("signed in", signedIn), ("callback used again", usedAgain), ("not a sign-in link", notALink)]
        for (name, page) in pages {
            #expect(page.headers["Content-Type"] == "text/html; charset=utf-8", "\(name): \(page.status) \(page.text.prefix(200))")
            #expect(page.headers["X-Frame-Options"] == "DENY", "\(name)")
            #expect(page.headers["X-Content-Type-Options"] == "nosniff", "\(name)")
            let policy = page.headers["Content-Security-Policy"] ?? ""
            let directives = Set(policy.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) })
            #expect(directives.isSuperset(of: ["default-src 'none'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'none'"]), "\(name): \(policy)")
            // The page's one inline style is the one the policy allows (or the browser would drop it).
            let style = page.text.range(of: "<style>").flatMap { open in
                page.text.range(of: "</style>", range: open.upperBound..<page.text.endIndex).map { String(page.text[open.upperBound..<$0.lowerBound]) }
            }
            let hash = try #require(style.map { Data(SHA256.hash(utf8: $0)).base64EncodedString() }, "\(name): no inline style")
            #expect(directives.contains("style-src 'sha256-\(hash)'"), "\(name): \(policy)")
            #expect(!page.text.contains("<script"), "\(name)")
        }
    }
}
