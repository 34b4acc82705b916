import Foundation
import Synchronization
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

/// behaviour §3 signed `GET /v1/sign-ins/start` links: HMAC over the canonical parameters, expiry
/// within 10 minutes, tampering named by field. (Single use is in the database: end-to-end tests.)
@Suite("Sign-in start links")
struct SignInStartLinksTests {
    static let ringA = try! KeyRing(parsing: "a:" + Data(repeating: 1, count: 32).base64EncodedString())
    static let ringB = try! KeyRing(parsing: "b:" + Data(repeating: 2, count: 32).base64EncodedString())

    final class Clock: Sendable {
        let value = Mutex(1_800_000_000)
        var now: Int { value.withLock { $0 } }
        func advance(_ seconds: Int) { value.withLock { $0 += seconds } }
    }

    static func links(_ ring: KeyRing, _ clock: Clock) -> SignInStartLinks {
        SignInStartLinks(ring: ring, baseURL: { "https://relay.example" }, now: { clock.now })
    }

    /// The query as the server hands it to the route: names and values percent-decoded.
    static func query(of url: String) -> [(name: String, value: String)] {
        URLComponents(string: url)!.queryItems!.map { ($0.name, $0.value ?? "") }
    }

    static let hint = SignInHint(
        loginHint: "alice@contoso.example", scopes: ["Sites.Read.All", "https://management.azure.com/.default"],
        claims: #"{"access_token":{"nbf":{"essential":true,"value":"1657834417"}}}"#, authority: "https://login.microsoftonline.com/t", prompt: nil)

    @Test("A minted link verifies and carries the hint's parameters, on the public base URL")
    func roundTrip() throws {
        let clock = Clock()
        let links = Self.links(Self.ringA, clock)
        let url = links.mint(Self.hint, reader: nil).url
        #expect(url.hasPrefix("https://relay.example/v1/sign-ins/start?"))
        let (parameters, signature) = try links.verify(Self.query(of: url))
        #expect(parameters["login_hint"] == "alice@contoso.example")
        #expect(parameters["scopes"] == "Sites.Read.All https://management.azure.com/.default")
        #expect(parameters["claims"] == Self.hint.claims)
        #expect(parameters["authority"] == "https://login.microsoftonline.com/t")
        #expect(parameters["expires"] == String(clock.now + 600))
        #expect(signature.count == 32)
        #expect(links.mint(Self.hint, reader: nil).url != url, "two links minted in the same second differ (nonce)")
    }

    @Test(
        "A link carries the home_account_id it is bound to and the sign_in_id it starts, both signed; the id proves itself and its reader key"
    )
    func boundLinkAndSignInId() throws {
        let clock = Clock()
        let links = Self.links(Self.ringA, clock)
        var hint = Self.hint
        hint.homeAccountId = "00000000-0000-0000-0000-00000000a11c.11111111-1111-1111-1111-111111111111"
        let (url, signInId, _) = links.mint(hint, reader: "key1")
        let (parameters, _) = try links.verify(Self.query(of: url))
        #expect(parameters["home_account_id"] == hint.homeAccountId)
        #expect(parameters["sign_in_id"] == signInId)
        #expect(signInId.hasPrefix("si_"))
        let unbound = try links.verify(Self.query(of: links.mint(Self.hint, reader: nil).url)).parameters
        #expect(unbound["home_account_id"] == nil, "a hint without an account's user is open to any user")

        #expect(links.linkSignInId(signInId, reader: "key1")?.expires == clock.now + 600)
        #expect(links.linkSignInId(signInId, reader: "key1")?.isReader == true)
        #expect(links.linkSignInId(signInId, reader: "key2")?.isReader == false, "another key may not read it by the id alone")
        #expect(links.linkSignInId(signInId, reader: nil)?.isReader == false)
        #expect(links.linkSignInId("si_" + String(repeating: "A", count: 43), reader: "key1") == nil, "a forged id")
        #expect(links.linkSignInId("si_abc", reader: "key1") == nil)
        // 32 bytes are 43 characters with 2 bits unused: the last character's other spellings
        // decode to the same bytes and were taken as this id (found by the new-user try).
        let last = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_").firstIndex(of: signInId.last!)!
        for low in 1...3 {
            let respelled = String(signInId.dropLast()) + String(Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")[last | low])
            #expect(links.linkSignInId(respelled, reader: "key1") == nil, "\(respelled)")
        }
        let other = try KeyRing(parsing: "b:" + Data(repeating: 2, count: 32).base64EncodedString())
        #expect(Self.links(other, clock).linkSignInId(signInId, reader: "key1") == nil, "another ring's id")
    }

    @Test("A changed, added or removed parameter is 403 sig; a missing sig or expires is 400")
    func tampered() {
        let clock = Clock()
        let links = Self.links(Self.ringA, clock)
        let query = Self.query(of: links.mint(Self.hint, reader: nil).url)
        func rejection(_ items: [(name: String, value: String)]) -> SignInStartLinks.Rejection? {
            do {
                _ = try links.verify(items)
                return nil
            } catch { return error }
        }
        let changed = query.map { $0.name == "login_hint" ? (name: $0.name, value: "mallory@contoso.example") : $0 }
        #expect(rejection(changed) == .init(status: 403, field: "sig", detail: "The link's signature does not match its parameters."))
        #expect(rejection(query + [(name: "prompt", value: "none")])?.field == "sig")
        #expect(rejection(query.filter { $0.name != "claims" })?.field == "sig")
        #expect(rejection(query + [(name: "evil", value: "1")]) == .init(status: 400, field: "evil", detail: "'evil' is not a sign-in link parameter."))
        #expect(rejection(query.filter { $0.name != "sig" })?.status == 400)
        #expect(rejection(query.filter { $0.name != "expires" })?.field == "expires")
        let later = query.map { $0.name == "expires" ? (name: $0.name, value: String(clock.now + 6_000)) : $0 }
        #expect(rejection(later)?.field == "sig", "extending the expiry breaks the signature")
    }

    @Test("An expired link is 403 expires; a link minted far ahead is refused too")
    func expiry() {
        let clock = Clock()
        let links = Self.links(Self.ringA, clock)
        let query = Self.query(of: links.mint(Self.hint, reader: nil).url)
        clock.advance(601)
        #expect(throws: SignInStartLinks.Rejection(status: 403, field: "expires", detail: "The link has expired; ask for a new one.")) {
            try links.verify(query)
        }
        let future = Clock()
        future.advance(3_600)
        let ahead = Self.query(of: Self.links(Self.ringA, future).mint(Self.hint, reader: nil).url)
        #expect(throws: SignInStartLinks.Rejection(status: 403, field: "expires", detail: "'expires' may be at most 10 minutes ahead.")) {
            try links.verify(ahead)
        }
    }

    @Test("Links signed with an older key of the ring verify after rotation; another ring's do not")
    func rotation() throws {
        let clock = Clock()
        let old = Self.query(of: Self.links(Self.ringA, clock).mint(Self.hint, reader: nil).url)
        let rotated = try KeyRing(
            parsing: "b:" + Data(repeating: 2, count: 32).base64EncodedString() + ",a:" + Data(repeating: 1, count: 32).base64EncodedString())
        _ = try Self.links(rotated, clock).verify(old)
        #expect(throws: SignInStartLinks.Rejection.self) { try Self.links(Self.ringB, clock).verify(old) }
    }
}
