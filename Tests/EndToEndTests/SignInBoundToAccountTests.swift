import Foundation
import HTTPClientBridge
import PostgresBridge
import Testing
import TokenRelayTesting

/// A sign-in for an existing account completes only for that account's user (behaviour §3.8,
/// issue 33 item 1; MSAL for iOS and macOS refuses the same case with `MSALErrorMismatchedUser`):
/// the person at the browser may pick another account on the authority's page (the
/// `login_hint` only pre-fills it), and the callback then answers 409 `user_mismatch` naming the
/// expected account, stores nothing of the other user and leaves the account as it was. A
/// sign-in that names no account stays open to any user.
@Suite("Sign-in links bound to their account")
struct SignInBoundToAccountTests {
    static let alice = "alice@contoso.example"
    static let bob = "bob@contoso.example"

    /// What is stored that a sign-in could add: accounts, refresh tokens, access tokens, external ids.
    static func storedCounts(_ stack: TokenRelayStack) async throws -> [Int64] {
        try await stack.withDatabase { connection in
            try ["accounts", "refresh_tokens", "access_tokens", "account_external_ids"].map { table in
                try connection.query("SELECT count(*) AS n FROM \(table)").rows.first?.int("n") ?? -1
            }
        }
    }

    static func bobRows(_ stack: TokenRelayStack) async throws -> Int64 {
        try await stack.withDatabase { connection in
            try connection.query("SELECT count(*) AS n FROM accounts WHERE lower(username) = $1", [.text(bob)]).rows.first?.int("n") ?? -1
        }
    }

    static func refusals(_ stack: TokenRelayStack) async throws -> [[String?]] {
        try await stack.withDatabase { connection in
            try connection.query("SELECT actor, account_id, outcome, detail::text AS detail FROM audit_events WHERE action = 'sign_in.refused'").rows
                .map { [$0.string("actor"), $0.string("account_id"), $0.string("outcome"), $0.string("detail")] }
        }
    }

    /// Alice's account whose refresh token died: the problem of a silent request, with its link.
    static func deadAlice(_ stack: TokenRelayStack) async throws -> (accountId: String, problem: [String: Any]) {
        let accountId = try await stack.signInAccountId(alice)
        _ = try await stack.control("POST", "/_control/users/\(alice)", json: ["revoke_refresh_tokens": true])
        let refused = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": accountId, "scopes": ["User.Read"], "force_refresh": true])
        #expect(refused.status == 409, "\(refused.text)")
        return (accountId, refused.json)
    }

    @Test(
        "A problem's sign_in_url completed by another user: 409 user_mismatch naming the account, nothing of that user stored, the account unchanged, the refusal audited; the refusal's new link completes for the right user, same account_id"
    )
    func pinnedLinkRefusesAnotherUser() async throws {
        let stack = try await TokenRelayStack(name: "e2e_sign_in_bound_link")
        defer { stack.stop() }
        let (aliceId, problem) = try await Self.deadAlice(stack)
        let link = try #require(problem["sign_in_url"] as? String, "\(problem)")
        let before = try await stack.request("GET", "/v1/accounts/\(aliceId)")
        let counts = try await Self.storedCounts(stack)

        let start = try await stack.request("GET", link, authenticated: false)
        #expect(start.status == 302, "\(start.text)")
        let authorize = try #require(start.headers["Location"])
        #expect(authorize.contains("login_hint=alice%40contoso.example"), "\(authorize)")
        let callback = try await stack.request("GET", try await stack.authorize(authorize, as: Self.bob), authenticated: false)
        #expect(callback.status == 409, "\(callback.text)")
        #expect(callback.json["error"] as? String == "user_mismatch", "\(callback.text)")
        #expect(callback.json["account_id"] as? String == aliceId)
        #expect(callback.json["username"] as? String == Self.alice)
        #expect(callback.text.contains("bbbbbbbb") == false, "nothing of the other user is named: \(callback.text)")

        #expect(try await Self.bobRows(stack) == 0, "no account of the other user")
        #expect(try await Self.storedCounts(stack) == counts, "no account, token or external id stored")
        let after = try await stack.request("GET", "/v1/accounts/\(aliceId)")
        #expect(after.text == before.text, "the account is as it was")
        #expect(after.json["state"] as? String == "interaction_required")
        let refusals = try await Self.refusals(stack)
        #expect(refusals.count == 1, "\(refusals)")
        #expect(refusals.first?[0] == "sign-in-link" && refusals.first?[1] == aliceId && refusals.first?[2] == "user_mismatch", "\(refusals)")

        // The sign-in the problem named reads failed, with the refusal.
        let firstId = try #require(problem["sign_in_id"] as? String)
        let outcome = try await stack.request("GET", "/v1/sign-ins/\(firstId)")
        #expect(outcome.json["status"] as? String == "failed", "\(outcome.text)")
        #expect((outcome.json["problem"] as? [String: Any])?["error"] as? String == "user_mismatch")

        // The refusal carries a new link for the same account: the right user completes it.
        let again = try #require(callback.json["sign_in_url"] as? String, "\(callback.text)")
        let restart = try await stack.request("GET", again, authenticated: false)
        let location = try await stack.authorize(try #require(restart.headers["Location"], "\(restart.text)"), as: Self.alice)
        let completed = try await stack.request("GET", location, authenticated: false)
        #expect(completed.status == 200, "\(completed.text)")
        #expect((completed.json["account"] as? [String: Any])?["account_id"] as? String == aliceId)
        let silent = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": aliceId, "scopes": ["User.Read"]])
        #expect(silent.status == 200, "\(silent.text)")
    }

    @Test(
        "POST /v1/sign-ins with account_id: another user is refused (no account, token or external id of theirs stored) and the right one reconnects the same account"
    )
    func postedSignInForAnAccount() async throws {
        let stack = try await TokenRelayStack(name: "e2e_sign_in_bound_post")
        defer { stack.stop() }
        let aliceId = try await stack.signInAccountId(Self.alice)
        let counts = try await Self.storedCounts(stack)
        let started = try await stack.request(
            "POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "account_id": aliceId, "external_id": "crm-42"])
        #expect(started.status == 201, "\(started.text)")
        let authorize = try #require(started.json["authorize_url"] as? String)
        #expect(authorize.contains("login_hint=alice%40contoso.example"), "the account's username is the default login_hint: \(authorize)")
        let refused = try await stack.request("GET", try await stack.authorize(authorize, as: Self.bob), authenticated: false)
        #expect(refused.status == 409, "\(refused.text)")
        #expect(refused.json["error"] as? String == "user_mismatch")
        #expect(refused.json["account_id"] as? String == aliceId)
        #expect(try await Self.bobRows(stack) == 0)
        #expect(try await Self.storedCounts(stack) == counts, "nothing stored, the external id neither")
        #expect(try await Self.refusals(stack).first?[0] == stack.apiKeyId, "the starter's key id is the actor")

        let unknown = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "account_id": "acc_unknown"])
        #expect(unknown.status == 404, "\(unknown.text)")
        #expect(unknown.json["field"] as? String == "account_id")

        let second = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "account_id": aliceId])
        let location = try await stack.authorize(try #require(second.json["authorize_url"] as? String), as: Self.alice)
        let completed = try await stack.request("GET", location, authenticated: false)
        #expect(completed.status == 200, "\(completed.text)")
        #expect((completed.json["account"] as? [String: Any])?["account_id"] as? String == aliceId)
    }

    @Test("A sign-in that names no account stays open to any user: login_hint alice, bob signs in and gets an account of his own, created")
    func unboundSignInIsOpen() async throws {
        let stack = try await TokenRelayStack(name: "e2e_sign_in_unbound")
        defer { stack.stop() }
        let aliceId = try await stack.signInAccountId(Self.alice)
        let started = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": Self.alice])
        let signInId = try #require(started.json["sign_in_id"] as? String)
        let location = try await stack.authorize(try #require(started.json["authorize_url"] as? String), as: Self.bob)
        let completed = try await stack.request("GET", location, authenticated: false)
        #expect(completed.status == 200, "\(completed.text)")
        let account = try #require(completed.json["account"] as? [String: Any])
        #expect(account["username"] as? String == Self.bob)
        let bobId = try #require(account["account_id"] as? String)
        #expect(bobId != aliceId)
        let outcome = try await stack.request("GET", "/v1/sign-ins/\(signInId)")
        #expect(outcome.status == 200, "\(outcome.text)")
        #expect(outcome.json["status"] as? String == "completed", "\(outcome.text)")
        #expect(outcome.json["account_id"] as? String == bobId)
        #expect(outcome.json["created"] as? Bool == true)
    }
}
