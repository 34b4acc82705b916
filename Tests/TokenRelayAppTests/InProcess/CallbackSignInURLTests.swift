import Foundation
import HTTPClientBridge
import Testing
import TokenRelayTesting

/// The sign-in callback's `interaction_required` answers carry a `sign_in_url` for the same
/// sign-in (behaviour §3.2, §4.4, §12.4: every problem that asks for interaction has one). They
/// used to carry none, so the caller had nothing to send the user to but a new `POST /v1/sign-ins`.
@Suite("The callback's interaction_required carries a sign_in_url, in process", .serialized)
struct CallbackSignInURLTests {
    static let username = "alice@contoso.example"

    /// Starts a sign-in with `body` and returns the `state` of its authorize URL (nothing is sent
    /// to the authority).
    static func start(_ stack: InProcessApp, _ body: [String: Any]) async throws -> String {
        let started = try await stack.request("POST", "/v1/sign-ins", json: body)
        let authorize = try #require(started.json["authorize_url"] as? String, "\(started.text)")
        let items = try #require(URLComponents(string: authorize)?.queryItems)
        return try #require(items.first { $0.name == "state" }?.value)
    }

    /// The query of `url` by name.
    static func query(_ url: String) throws -> [String: String] {
        let items = try #require(URLComponents(string: url)?.queryItems)
        return Dictionary(items.map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first })
    }

    /// Follows `link` as the user's browser would: TokenRelay's 302, the emulator's authorize,
    /// TokenRelay's callback. Returns the callback's answer and the authorize URL.
    static func follow(_ stack: InProcessApp, _ link: String) async throws -> (callback: TestResponse, authorize: String) {
        let started = try await stack.request("GET", link, authenticated: false)
        #expect(started.status == 302, "\(started.text)")
        let authorize = try #require(started.headers["Location"])
        let redirect = try await stack.browser.execute(HTTPClientRequest(method: "GET", url: authorize))
        #expect(redirect.status == 302)
        let location = try #require(redirect.headers["Location"])
        return (try await stack.request("GET", location, authenticated: false), authorize)
    }

    @Test("A refused code and an authority's login_required both carry a link for the same sign-in, which signs the user in")
    func callbackInteractionRequiredCarriesALink() async throws {
        let redirectAfter = "https://app.example/done"
        let stack = try await InProcessApp(name: "inproc_callback_sign_in_url") { $0.identity.redirectAfterOrigins = ["https://app.example"] }
        defer { stack.stop() }
        let claims = #"{"id_token":{"acr":{"essential":true}}}"#
        let authority = "\(stack.emulator.baseURL)/organizations"
        let body: [String: Any] = [
            "scopes": ["User.Read", "Mail.Read"], "login_hint": Self.username, "claims": claims, "redirect_after": redirectAfter, "prompt": "none",
            "authority": authority,
        ]

        let badCode = try await stack.request("GET", "/v1/sign-ins/callback?state=\(try await Self.start(stack, body))&code=bogus", authenticated: false)
        let declined = try await stack.request(
            "GET",
            "/v1/sign-ins/callback?state=\(try await Self.start(stack, body))&error=login_required&error_description=AADSTS50058%3A+no+session",
            authenticated: false)
        for (refused, code) in [(badCode, 70000), (declined, 50058)] {
            #expect(refused.status == 409, "\(refused.text)")
            #expect(refused.json["error"] as? String == "interaction_required", "\(refused.text)")
            #expect(refused.json["sts_error_codes"] as? [Int] == [code], "\(refused.text)")
            // No account yet: no account_state (it said "interaction_required" for a refused code).
            #expect(refused.json["account_state"] == nil, "\(refused.text)")
            let link = try #require(refused.json["sign_in_url"] as? String, "\(refused.text)")
            #expect(link.hasPrefix(InProcessApp.baseURL + "/v1/sign-ins/start?"), "\(link)")
            let signed = try Self.query(link)
            #expect(signed["login_hint"] == Self.username)
            #expect(signed["scopes"] == "Mail.Read User.Read")
            #expect(signed["redirect_after"] == redirectAfter)
            #expect(signed["authority"] == authority)
            // prompt=none is what just failed: the link lets the authority ask.
            #expect(signed["prompt"] == nil)

            let (callback, authorizeURL) = try await Self.follow(stack, link)
            #expect(authorizeURL.hasPrefix(authority + "/oauth2/v2.0/authorize?"), "\(authorizeURL)")
            let authorize = try Self.query(authorizeURL)
            #expect(authorize["login_hint"] == Self.username)
            #expect(authorize["scope"]?.split(separator: " ").contains("https://graph.microsoft.com/Mail.Read") == true, "\(authorize)")
            #expect(authorize["claims"]?.contains(#""acr""#) == true, "\(authorize)")
            #expect(callback.status == 303, "\(callback.text)")
            #expect(callback.headers["Location"]?.hasPrefix(redirectAfter + "?account_id=acc_") == true, "\(callback.headers)")
        }
    }

    @Test("A sign-in at the default authority without login_hint gets a link without them")
    func defaultsStayDefaults() async throws {
        let stack = try await InProcessApp(name: "inproc_callback_sign_in_url_plain")
        defer { stack.stop() }
        let state = try await Self.start(stack, ["scopes": ["User.Read"]])
        let refused = try await stack.request("GET", "/v1/sign-ins/callback?state=\(state)&code=bogus", authenticated: false)
        #expect(refused.status == 409, "\(refused.text)")
        let link = try #require(refused.json["sign_in_url"] as? String, "\(refused.text)")
        let signed = try Self.query(link)
        #expect(signed["scopes"] == "User.Read")
        #expect(signed["login_hint"] == nil)
        #expect(signed["authority"] == nil)
        #expect(signed["redirect_after"] == nil)
    }

    /// A large `claims` made a link of 20 KB that the service then refused itself with 414
    /// (found by a new-user try): a link over the request-target limit is not handed out.
    @Test("Every sign_in_url handed out is followable (302, not 414); one that would exceed the target limit is left out and the detail says why")
    func linksFitTheTargetLimit() async throws {
        let stack = try await InProcessApp(name: "inproc_callback_sign_in_url_size")
        defer { stack.stop() }
        var followed = 0
        var withheld = 0
        // Values whose quotes and commas take three bytes each in the link's query: its size as
        // sent (what a proxy in front and the server's connection memory hold) is what must fit.
        for count in stride(from: 600, through: 800, by: 25) {
            let values = (0..<count).map { #""c\#($0 % 10)""# }.joined(separator: ",")
            let claims = #"{"id_token":{"acr":{"essential":true,"values":["# + values + "]}}}"
            let state = try await Self.start(stack, ["scopes": ["User.Read"], "login_hint": Self.username, "claims": claims])
            let refused = try await stack.request("GET", "/v1/sign-ins/callback?state=\(state)&code=bogus", authenticated: false)
            #expect(refused.status == 409, "\(count): \(refused.text)")
            if let link = refused.json["sign_in_url"] as? String {
                #expect(link.utf8.count - InProcessApp.baseURL.utf8.count <= 8_192, "a link of \(link.utf8.count) bytes was handed out")
                let started = try await stack.request("GET", link, authenticated: false)
                #expect(started.status == 302, "claims of \(claims.utf8.count) bytes: the link handed out answered \(started.status) \(started.text)")
                #expect(refused.json["sign_in_id"] != nil)
                followed += 1
            } else {
                #expect(refused.json["sign_in_id"] == nil)
                #expect((refused.json["detail"] as? String)?.contains("No sign_in_url: a link carrying these scopes and claims would exceed") == true)
                withheld += 1
            }
        }
        #expect(followed > 0 && withheld > 0, "followed \(followed), withheld \(withheld): the sizes tried do not straddle the limit")
    }
}
