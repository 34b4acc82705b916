import CryptoBridge
import Foundation
import Testing
import TokenRelayTesting

/// `redirect_after` (behaviour §3; issue 10 item 13): a well-formed absolute URL (RFC 3986 §3, §4.3)
/// on an allowed origin, checked when the sign-in starts (`POST /v1/sign-ins` and the signed
/// `GET /v1/sign-ins/start`); the callback's `Location` adds `account_id` to its query.
@Suite("redirect_after is a well-formed absolute URL, checked at the start", .serialized)
struct RedirectAfterTests {
    static let origin = "http://127.0.0.1:9"
    /// Each is refused with 400 `invalid_request` naming `redirect_after`.
    static let malformed = [
        "\(origin)/\r\nSet-Cookie: a=b",
        "\(origin)/a b",
        "\(origin)/line\u{2028}separator",
        "\(origin)/caf\u{e9}",
        "\(origin)/<script>",
        "\(origin)/tab\there",
        "\(origin)/bad%zzescape",
        "\(origin)/x#one#two",
        "//127.0.0.1:9/relative",
        "/relative",
        // Strict at the edges: userinfo reads as another host, and an account_id of its own came
        // before the real one (`?account_id=acc_FAKE&account_id=<id>`).
        "http://evil.example@127.0.0.1:9/",
        "http://user:pass@127.0.0.1:9/done",
        "\(origin)/done?account_id=acc_FAKE",
        "\(origin)/done?x=1&account%5Fid=acc_FAKE",
    ]

    static func stack(_ name: String) async throws -> TokenRelayStack {
        try await TokenRelayStack(name: name, environment: ["TOKENRELAY_REDIRECT_AFTER_ORIGINS": origin])
    }

    /// A signed `GET /v1/sign-ins/start` URL for `parameters`, signed as the service signs
    /// (HMAC-SHA256 under HMAC-SHA256(first ring key, "sign-in-start") over the sorted,
    /// form-encoded parameters).
    static func signedStart(_ stack: TokenRelayStack, _ parameters: [(String, String)]) throws -> String {
        let ring = try #require(stack.environment["TOKENRELAY_ENCRYPTION_KEYS"])
        let first = try #require(ring.split(separator: ",").first?.split(separator: ":", maxSplits: 1).last)
        let key = HMACSHA256.authenticationCode(for: Array("sign-in-start".utf8), key: Array(try #require(Data(base64Encoded: String(first)))))
        let all = parameters + [("expires", String(Int(Date().timeIntervalSince1970) + 300)), ("nonce", UUID().uuidString)]
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        func escape(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: allowed)! }
        let canonical = all.sorted { $0.0 < $1.0 }.map { escape($0.0) + "=" + escape($0.1) }.joined(separator: "&")
        let signature = Base64URL.encode(HMACSHA256.authenticationCode(for: Array(canonical.utf8), key: key))
        return stack.baseURL + "/v1/sign-ins/start?" + canonical + "&sig=" + signature
    }

    @Test("Control characters, spaces, raw non-ASCII, bad escapes and relative references are 400 naming redirect_after, on both starts")
    func malformedIsRefusedAtStart() async throws {
        let stack = try await Self.stack("e2e_redirect_after_bad")
        defer { stack.stop() }
        for bad in Self.malformed {
            let posted = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "redirect_after": bad])
            #expect(posted.status == 400, "\(bad.debugDescription): \(posted.text)")
            #expect(posted.json["error"] as? String == "invalid_request", "\(bad.debugDescription)")
            #expect(posted.json["field"] as? String == "redirect_after", "\(bad.debugDescription)")

            let link = try Self.signedStart(stack, [("scopes", "User.Read"), ("redirect_after", bad)])
            let started = try await stack.request("GET", link, authenticated: false)
            #expect(started.status == 400, "\(bad.debugDescription): \(started.text)")
            #expect(started.json["field"] as? String == "redirect_after", "\(bad.debugDescription)")
        }
        // A signed start with a good redirect_after still answers 302 to the authority.
        let good = try await stack.request(
            "GET", try Self.signedStart(stack, [("scopes", "User.Read"), ("redirect_after", Self.origin + "/ok")]), authenticated: false)
        #expect(good.status == 302, "\(good.text)")
    }

    @Test("The callback's Location joins account_id to an existing query with & and keeps the fragment")
    func locationKeepsQueryAndFragment() async throws {
        let stack = try await Self.stack("e2e_redirect_after_good")
        defer { stack.stop() }
        for (redirectAfter, prefix, suffix) in [
            ("\(Self.origin)/done?step=2&x=a%20b", "\(Self.origin)/done?step=2&x=a%20b&account_id=", ""),
            ("\(Self.origin)/done", "\(Self.origin)/done?account_id=", ""),
            ("\(Self.origin)/done?step=2#top", "\(Self.origin)/done?step=2&account_id=", "#top"),
        ] {
            let started = try await stack.request(
                "POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": "alice@contoso.example", "redirect_after": redirectAfter])
            #expect(started.status == 201, "\(started.text)")
            let authorize = try #require(started.json["authorize_url"] as? String)
            let redirect = try await stack.http.execute(.init(method: "GET", url: authorize))
            let callback = try await stack.request("GET", try #require(redirect.headers["Location"]), authenticated: false)
            #expect(callback.status == 303, "\(callback.text)")
            let location = try #require(callback.headers["Location"])
            #expect(location.hasPrefix(prefix), "\(location)")
            #expect(location.hasSuffix(suffix), "\(location)")
            let accountId = location.dropFirst(prefix.count).dropLast(suffix.count)
            #expect(accountId.hasPrefix("acc_"), "\(location)")
            #expect(try await stack.request("GET", "/v1/accounts/\(accountId)").status == 200)
        }
    }
}
