import Foundation
import HTTPClientBridge
import Testing
import TokenRelayTesting

/// `HEAD` on a `sign_in_url` (a link checker, a mail or chat preview) checks the link without
/// using it: it used to start the sign-in, and the user's own click then got 403 "used already".
@Suite("HEAD on a sign-in link, in process", .serialized)
struct SignInLinkHeadTests {
    @Test("HEAD on a sign_in_url is 204 and leaves it usable; the GET redirects; HEAD after that is 403")
    func headDoesNotUseTheLink() async throws {
        let stack = try await InProcessApp(name: "inproc_sign_in_link_head")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control("POST", "/_control/users/alice@contoso.example", json: ["revoke_refresh_tokens": true])
        let refused = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        let link = try #require(refused.json["sign_in_url"] as? String, "\(refused.text)")

        for _ in 0..<2 {
            let checked = try await stack.request("HEAD", link, authenticated: false)
            #expect(checked.status == 204, "\(checked.text)")
            #expect(checked.headers["Location"] == nil)
        }
        let followed = try await stack.request("GET", link, authenticated: false)
        #expect(followed.status == 302, "\(followed.text)")
        #expect(followed.headers["Location"]?.contains("/oauth2/v2.0/authorize?") == true, "\(followed.headers)")
        let used = try await stack.request("HEAD", link, authenticated: false)
        #expect(used.status == 403)
        let tampered = try await stack.request("HEAD", link + "x", authenticated: false)
        #expect(tampered.status == 403 || tampered.status == 400, "\(tampered.text)")
    }
}

/// A callback that carries the sign-in's `state` but neither `code` nor `error` (a stray or cut
/// request) is refused without using the sign-in up: it used to, and the user's real callback
/// then got "unknown, already completed".
@Suite("A callback without code or error, in process", .serialized)
struct CallbackWithoutCodeTests {
    @Test("state alone is 400 naming code; the real callback with the same state still signs the user in")
    func stateAloneKeepsTheSignIn() async throws {
        let stack = try await InProcessApp(name: "inproc_callback_no_code")
        defer { stack.stop() }
        let (_, location) = try await Self.callback(stack)
        let components = try #require(URLComponents(string: location))
        let state = try #require(components.queryItems?.first { $0.name == "state" }?.value)
        var stray = components
        stray.queryItems = [URLQueryItem(name: "state", value: state)]
        let refused = try await stack.request("GET", try #require(stray.string), authenticated: false)
        #expect(refused.status == 400, "\(refused.text)")
        #expect(refused.json["field"] as? String == "code", "\(refused.text)")
        let real = try await stack.request("GET", location, authenticated: false)
        #expect(real.status == 200, "\(real.text)")
        #expect((real.json["account"] as? [String: Any])?["username"] as? String == "alice@contoso.example", "\(real.text)")
    }

    /// Starts a sign-in for alice and has the emulator sign her in; returns the sign-in's id and
    /// the callback URL the authority redirected to, not yet followed.
    static func callback(_ stack: InProcessApp) async throws -> (signInId: String, location: String) {
        let started = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": "alice@contoso.example"])
        let id = try #require(started.json["sign_in_id"] as? String, "\(started.text)")
        let authorize = try #require(started.json["authorize_url"] as? String, "\(started.text)")
        let redirect = try await stack.browser.execute(HTTPClientRequest(method: "GET", url: authorize))
        return (id, try #require(redirect.headers["Location"]))
    }
}

/// `HEAD` on the callback (a link checker or a prefetch of the redirect) checks it without
/// completing the sign-in: it used to redeem the code, and the person's own callback then got 400
/// "already completed" (found by a new-user try).
@Suite("HEAD on the sign-in callback, in process", .serialized)
struct CallbackHeadTests {
    @Test("HEAD on the callback is 204 and redeems nothing; the GET then signs the user in; HEAD after that is 400 naming state")
    func headDoesNotCompleteTheSignIn() async throws {
        let stack = try await InProcessApp(name: "inproc_callback_head")
        defer { stack.stop() }
        let (id, location) = try await CallbackWithoutCodeTests.callback(stack)
        let redemptions = try await stack.control("GET", "/_control/stats").json["token_requests"] as? Int

        for _ in 0..<2 {
            let checked = try await stack.request("HEAD", location, authenticated: false)
            #expect(checked.status == 204, "\(checked.status) \(checked.text)")
        }
        #expect(try await stack.control("GET", "/_control/stats").json["token_requests"] as? Int == redemptions, "HEAD redeemed the code")
        #expect(try await stack.request("GET", "/v1/sign-ins/\(id)").json["status"] as? String == "pending")
        // What GET refuses before redeeming, HEAD refuses the same way.
        let components = try #require(URLComponents(string: location))
        var stray = components
        stray.queryItems = components.queryItems?.filter { $0.name == "state" }
        #expect(try await stack.request("HEAD", try #require(stray.string), authenticated: false).status == 400)

        let real = try await stack.request("GET", location, authenticated: false)
        #expect(real.status == 200, "\(real.text)")
        #expect((real.json["account"] as? [String: Any])?["username"] as? String == "alice@contoso.example", "\(real.text)")
        #expect(try await stack.request("HEAD", location, authenticated: false).status == 400)
    }
}
