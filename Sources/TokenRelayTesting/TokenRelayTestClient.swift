import Foundation
import HTTPClientBridge

/// What a test needs of a TokenRelay under test, whichever harness runs it: a live process
/// (``TokenRelayStack``) or the handler in process (`InProcessApp`, Hummingbird's router mode).
/// The flows written once on top of it (``signInThroughBrowser(_:scopes:authority:on:)``) behave
/// the same in both.
public protocol TokenRelayTestClient: Sendable {
    /// Sends a request to TokenRelay; `json` is encoded when given; the admin API key is sent
    /// unless `authenticated` is false. `path` is `/v1/...` or a URL TokenRelay handed out.
    func request(_ method: String, _ path: String, json body: Any?, headers extra: [String: String], authenticated: Bool) async throws
        -> TestResponse
    /// The emulator's base URL (`http://127.0.0.1:PORT`).
    var emulatorBaseURL: String { get }
    /// The HTTP client that plays the user's browser against the emulator.
    var browser: HTTPClient { get }
}

extension TokenRelayTestClient {
    /// Signs `username` in as a browser would: `POST /v1/sign-ins` (with `authority` when given),
    /// the emulator's authorize URL (it signs the user in and redirects), then TokenRelay's callback.
    /// - Parameter replica: the base URL of the replica to start on (its callback comes back to it);
    ///   nil: the client's own.
    /// - Returns: the callback's JSON (`{"account": {...}}`).
    /// - Throws: ``TestFailure`` naming the step that did not answer as a sign-in should.
    public func signInThroughBrowser(_ username: String, scopes: [String] = ["User.Read"], authority: String? = nil, on replica: String? = nil)
        async throws -> [String: Any]
    {
        var body: [String: Any] = ["scopes": scopes, "login_hint": username]
        if let authority { body["authority"] = authority }
        let started = try await request("POST", (replica ?? "") + "/v1/sign-ins", json: body, headers: [:], authenticated: true)
        guard started.status == 201, let authorize = started.json["authorize_url"] as? String else {
            throw TestFailure("POST /v1/sign-ins answered \(started.status): \(started.text)")
        }
        let redirect = try await browser.execute(HTTPClientRequest(method: "GET", url: authorize))
        guard redirect.status == 302, let location = redirect.headers["Location"] else {
            throw TestFailure("authorize answered \(redirect.status)")
        }
        let callback = try await request("GET", location, json: nil, headers: [:], authenticated: false)
        guard callback.status == 200 else { throw TestFailure("callback answered \(callback.status): \(callback.text)") }
        return callback.json
    }

    /// Answers the emulator's sign-in page for `authorizeURL` as a person who picks `username`
    /// there (whatever `login_hint` pre-filled): posts the page's form, the authorize parameters
    /// with `action=accept` and `login`, as the page's Accept button does (``SignInPage``).
    /// - Returns: the `Location` the authority redirects to (TokenRelay's callback URL).
    /// - Throws: ``TestFailure`` when the authority does not redirect.
    public func authorize(_ authorizeURL: String, as username: String) async throws -> String {
        guard let components = URLComponents(string: authorizeURL), let items = components.percentEncodedQueryItems else {
            throw TestFailure("not an authorize URL: \(authorizeURL)")
        }
        var form = items.map { "\($0.name)=\($0.value ?? "")" }
        form += ["action=accept", "login=" + (username.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? username)]
        var target = components
        target.percentEncodedQuery = nil
        let response = try await browser.execute(
            HTTPClientRequest(
                method: "POST", url: target.string ?? authorizeURL, headers: ["Content-Type": "application/x-www-form-urlencoded"],
                body: Array(form.joined(separator: "&").utf8)))
        guard response.status == 302, let location = response.headers["Location"] else {
            throw TestFailure("the sign-in page answered \(response.status) for \(username)")
        }
        return location
    }
}
