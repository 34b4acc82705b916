import Foundation
import HTTPCommon
import Testing

@testable import STSEmulator

/// The authorize endpoint's sign-in page (issue 29): a browser (`Accept: text/html`) gets a page
/// to pick or type an account, consent or cancel; its form posts back; other clients keep the
/// immediate redirect the tests rely on.
@Suite("Emulator sign-in page")
struct SignInPageTests {
    static let path = "/\(EmulatorHarness.contoso)/oauth2/v2.0/authorize"
    static let browser: HTTPHeaders = ["Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"]
    static let authorize = [
        ("client_id", EmulatorHarness.clientID), ("response_type", "code"), ("redirect_uri", EmulatorHarness.redirectURI),
        ("scope", "https://graph.microsoft.com/User.Read openid offline_access"), ("state", "s<\"1\">"), ("nonce", "n"),
        ("code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"), ("code_challenge_method", "S256"), ("login_hint", "bob@contoso.example"),
    ]

    /// The page's form fields as a browser would post them (hidden ones from the HTML), plus `choice`.
    static func post(_ h: EmulatorHarness, page: HTTPResponse, _ choice: [(String, String)]) async throws -> HTTPResponse {
        let html = String(decoding: page.body, as: UTF8.self)
        let hidden = try Regex(#"<input type="hidden" name="([^"]*)" value="([^"]*)">"#)
        let fields = html.matches(of: hidden).map { match in
            (unescape(String(match.output[1].substring ?? "")), unescape(String(match.output[2].substring ?? "")))
        }
        return await h.postForm(path, fields + choice, headers: browser)
    }

    static func unescape(_ text: String) -> String {
        text.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">").replacingOccurrences(of: "&quot;", with: "\"")
            .replacingOccurrences(of: "&#39;", with: "'").replacingOccurrences(of: "&amp;", with: "&")
    }

    static func redirectQuery(_ response: HTTPResponse) throws -> [String: String] {
        try #require(response.status == 302, "\(response.status): \(String(decoding: response.body, as: UTF8.self).prefix(300))")
        let location = try #require(response.headers["Location"])
        let components = try #require(URLComponents(string: location))
        return Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { a, _ in a })
    }

    @Test("A browser gets the page: the tenant's accounts with login_hint's checked, the scopes, Accept and Cancel, escaped parameters")
    func pageForBrowsers() async throws {
        let h = try EmulatorHarness()
        let page = await h.get(Self.path, query: Self.authorize, headers: Self.browser)
        #expect(page.status == 200)
        #expect(page.headers["Content-Type"] == "text/html; charset=utf-8")
        let html = String(decoding: page.body, as: UTF8.self)
        #expect(html.contains(#"value="bob@contoso.example" checked>"#))
        #expect(html.contains(#"value="alice@contoso.example">"#))
        #expect(html.contains("<li>openid</li>"))
        #expect(html.contains(#"id="accept""#) && html.contains(#"id="cancel""#))
        #expect(html.contains(#"name="state" value="s&lt;&quot;1&quot;&gt;""#), "the state, escaped")
        #expect(!html.contains("s<\"1\">"))
    }

    @Test("Without Accept: text/html, or with prompt=none, the redirect comes at once (no UI)")
    func noPageForOtherClients() async throws {
        let h = try EmulatorHarness()
        #expect(try Self.redirectQuery(await h.get(Self.path, query: Self.authorize))["code"] != nil)
        #expect(try Self.redirectQuery(await h.get(Self.path, query: Self.authorize, headers: ["Accept": "application/json"]))["code"] != nil)
        let none = try Self.redirectQuery(await h.get(Self.path, query: Self.authorize + [("prompt", "none")], headers: Self.browser))
        #expect(none["code"] != nil)
    }

    @Test("Accept with a picked account redirects with a code for it; a typed account wins over the pick; the state comes back verbatim")
    func acceptSignsInTheChosenAccount() async throws {
        let h = try EmulatorHarness()
        let page = await h.get(Self.path, query: Self.authorize, headers: Self.browser)
        let picked = try Self.redirectQuery(try await Self.post(h, page: page, [("account", "alice@contoso.example"), ("action", "accept")]))
        #expect(picked["state"] == "s<\"1\">")
        let code = try #require(picked["code"])
        #expect(h.emulator.state.withLock { $0.codes[code]?.username } == "alice@contoso.example")
        let typed = try Self.redirectQuery(
            try await Self.post(h, page: page, [("account", "alice@contoso.example"), ("login", " Bob@Contoso.example "), ("action", "accept")]))
        #expect(h.emulator.state.withLock { $0.codes[typed["code"] ?? ""]?.username } == "bob@contoso.example")
    }

    @Test("An unknown account typed shows the page again with AADSTS50034; nothing chosen asks for one")
    func unknownAccountStaysOnThePage() async throws {
        let h = try EmulatorHarness()
        let page = await h.get(Self.path, query: Self.authorize, headers: Self.browser)
        let unknown = try await Self.post(h, page: page, [("login", "nobody@contoso.example"), ("action", "accept")])
        #expect(unknown.status == 200)
        let html = String(decoding: unknown.body, as: UTF8.self)
        #expect(html.contains(#"<p id="error" role="alert">"#) && html.contains("AADSTS50034"))
        #expect(html.contains(#"id="login" name="login" autocomplete="username" value="nobody@contoso.example""#), "what was typed stays")
        let none = try await Self.post(h, page: page, [("action", "accept")])
        #expect(none.status == 200 && String(decoding: none.body, as: UTF8.self).contains(SignInPage.noAccount))
    }

    @Test("Cancel redirects access_denied with AADSTS65004, error_subcode=cancel and the state")
    func cancelRedirectsAccessDenied() async throws {
        let h = try EmulatorHarness()
        let page = await h.get(Self.path, query: Self.authorize, headers: Self.browser)
        let query = try Self.redirectQuery(try await Self.post(h, page: page, [("account", "bob@contoso.example"), ("action", "cancel")]))
        #expect(query["error"] == "access_denied")
        #expect(query["error_subcode"] == "cancel")
        #expect(query["error_description"]?.hasPrefix("AADSTS65004: ") == true)
        #expect(query["state"] == "s<\"1\">")
        #expect(query["code"] == nil)
    }
}
