import Foundation
import HTTPClientBridge
import Testing
import TokenRelayTesting

/// A caller can follow a sign-in (behaviour §3.9, issue 33 item 2): `POST /v1/sign-ins` and every
/// problem's `sign_in_url` name a `sign_in_id`; `GET /v1/sign-ins/{sign_in_id}` answers `pending`,
/// `completed` (with `account_id` and `created`), `failed` (with the problem) or `expired`, and
/// `?wait=S` holds a pending answer until the callback finishes it, on any replica, woken by the
/// replicas' notification channel without holding a database connection.
@Suite("Sign-ins a caller can follow")
struct SignInFollowTests {
    static let alice = "alice@contoso.example"

    static func start(_ stack: TokenRelayStack, on replica: String? = nil, _ body: [String: Any] = [:]) async throws -> (id: String, authorize: String) {
        let started = try await stack.request(
            "POST", (replica ?? "") + "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": alice].merging(body) { $1 })
        #expect(started.status == 201, "\(started.text)")
        return (try #require(started.json["sign_in_id"] as? String), try #require(started.json["authorize_url"] as? String))
    }

    /// The in-use connections of a replica's pool (`tokenrelay_db_pool_connections{state="in_use"}`).
    static func connectionsInUse(_ stack: TokenRelayStack, _ baseURL: String) async throws -> Double? {
        let text = try await stack.request("GET", baseURL + "/metrics", authenticated: false).text
        return ReplicaTests.sample(text, #"tokenrelay_db_pool_connections{state="in_use"}"#)
    }

    @Test(
        "A sign-in followed with wait=20 on another replica is answered completed within a second of the callback on the first, holding no database connection while it waits"
    )
    func waitAcrossReplicas() async throws {
        let stack = try await TokenRelayStack(name: "e2e_sign_in_follow_replicas")
        defer { stack.stop() }
        let replica = try await stack.startReplica()
        defer { replica.stop() }
        let (id, authorize) = try await Self.start(stack)

        let pending = try await stack.request("GET", replica.baseURL + "/v1/sign-ins/\(id)")
        #expect(pending.status == 200, "\(pending.text)")
        #expect(pending.json["status"] as? String == "pending")
        #expect(pending.json["account_id"] == nil)

        let waited = Task { () -> (TestResponse, ContinuousClock.Instant) in
            let response = try await stack.request("GET", replica.baseURL + "/v1/sign-ins/\(id)?wait=20")
            return (response, ContinuousClock.now)
        }
        // The follower waits on the other replica, off the pool.
        try await Task.sleep(for: .milliseconds(500))
        let sample = try await stack.request("GET", replica.baseURL + "/metrics", authenticated: false).text
        #expect(ReplicaTests.sample(sample, "tokenrelay_sign_in_followers") == 1, "one request waits")
        #expect(try await Self.connectionsInUse(stack, replica.baseURL) == 0, "no connection is held while waiting")

        let location = try await stack.authorize(authorize, as: Self.alice)
        let callback = try await stack.request("GET", location, authenticated: false)
        let calledBack = ContinuousClock.now
        #expect(callback.status == 200, "\(callback.text)")
        let accountId = try #require((callback.json["account"] as? [String: Any])?["account_id"] as? String)

        let (answer, answeredAt) = try await waited.value
        #expect(answer.status == 200, "\(answer.text)")
        #expect(answer.json["status"] as? String == "completed", "\(answer.text)")
        #expect(answer.json["account_id"] as? String == accountId)
        #expect(answer.json["created"] as? Bool == true)
        let lag = calledBack.duration(to: answeredAt)
        #expect(lag < .seconds(1), "answered \(lag) after the callback")

        // A second sign-in of the same user reconnects the account: created false.
        let (again, authorizeAgain) = try await Self.start(stack)
        _ = try await stack.request("GET", try await stack.authorize(authorizeAgain, as: Self.alice), authenticated: false)
        let reconnected = try await stack.request("GET", "/v1/sign-ins/\(again)?wait=5")
        #expect(reconnected.json["status"] as? String == "completed")
        #expect(reconnected.json["account_id"] as? String == accountId)
        #expect(reconnected.json["created"] as? Bool == false)
    }

    @Test(
        "A canceled sign-in is failed with its problem; wait holds a pending answer for the seconds asked; wait is 0-60; an unknown id is 404"
    )
    func failedAndBounds() async throws {
        let stack = try await TokenRelayStack(name: "e2e_sign_in_follow_failed")
        defer { stack.stop() }
        let (id, authorize) = try await Self.start(stack)
        let started = ContinuousClock.now
        let held = try await stack.request("GET", "/v1/sign-ins/\(id)?wait=1")
        #expect(held.json["status"] as? String == "pending")
        #expect(started.duration(to: .now) >= .milliseconds(900), "a pending answer is held for the wait")

        // The person cancels on the authority's page.
        let page = try #require(URLComponents(string: authorize))
        let form = (page.percentEncodedQueryItems ?? []).map { "\($0.name)=\($0.value ?? "")" } + ["action=cancel"]
        var target = page
        target.percentEncodedQuery = nil
        let canceled = try await stack.browser.execute(
            HTTPClientRequest(
                method: "POST", url: try #require(target.string), headers: ["Content-Type": "application/x-www-form-urlencoded"],
                body: Array(form.joined(separator: "&").utf8)))
        let callback = try await stack.request("GET", try #require(canceled.headers["Location"]), authenticated: false)
        #expect(callback.status == 400, "\(callback.text)")
        let failed = try await stack.request("GET", "/v1/sign-ins/\(id)?wait=5")
        #expect(failed.json["status"] as? String == "failed", "\(failed.text)")
        let problem = try #require(failed.json["problem"] as? [String: Any])
        #expect(problem["error"] as? String == "user_canceled")
        #expect(problem["status"] as? Int == 400)
        #expect(problem["sts_error_codes"] as? [Int] == [65004])
        let events = try await stack.request("GET", "/v1/events").json["events"] as? [[String: Any]] ?? []
        let failure = try #require(events.first { $0["type"] as? String == "sign_in.failed" }, "\(events)")
        #expect((failure["data"] as? [String: Any])?["sign_in_id"] as? String == id)
        #expect((failure["data"] as? [String: Any])?["error"] as? String == "user_canceled")
        #expect(failure["account_id"] is NSNull, "a sign-in that named no account")

        for bad in ["61", "-1", "1.5", "soon", ""] {
            let refused = try await stack.request("GET", "/v1/sign-ins/\(id)?wait=\(bad)")
            #expect(refused.status == 400, "wait=\(bad): \(refused.text)")
            #expect(refused.json["field"] as? String == "wait")
        }
        let unknown = try await stack.request("GET", "/v1/sign-ins/si_unknown")
        #expect(unknown.status == 404 && unknown.json["field"] as? String == "sign_in_id", "\(unknown.text)")
        #expect(try await stack.request("GET", "/v1/sign-ins/\(id)", authenticated: false).status == 401)
    }

    @Test("A callback whose code the authority could not take (503 after the retries) leaves the sign-in pending: the same callback, sent again, completes it")
    func unavailableAuthorityKeepsTheCallback() async throws {
        let stack = try await TokenRelayStack(name: "e2e_sign_in_follow_sts_down")
        defer { stack.stop() }
        let (id, authorize) = try await Self.start(stack)
        let location = try await stack.authorize(authorize, as: Self.alice)
        // Both attempts of the redemption (a 5xx is retried once) find the token endpoint down.
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: ["endpoint": "token", "status": 503, "error": "temporarily_unavailable", "error_codes": [90033], "count": 2])
        let first = try await stack.request("GET", location, authenticated: false)
        #expect(first.status == 503, "\(first.text)")
        #expect(first.headers["Retry-After"] != nil)
        let pending = try await stack.request("GET", "/v1/sign-ins/\(id)")
        #expect(pending.json["status"] as? String == "pending", "\(pending.text)")

        let again = try await stack.request("GET", location, authenticated: false)
        #expect(again.status == 200, "the callback could not be sent again: \(again.text)")
        let accountId = (again.json["account"] as? [String: Any])?["account_id"] as? String
        let completed = try await stack.request("GET", "/v1/sign-ins/\(id)")
        #expect(completed.json["status"] as? String == "completed", "\(completed.text)")
        #expect(accountId != nil && completed.json["account_id"] as? String == accountId)
        // Used up now, as any completed sign-in's callback.
        #expect(try await stack.request("GET", location, authenticated: false).status == 400)
    }

    @Test("A callback that cannot fetch the authority's signing keys spends no code: 503, the sign-in pending, the same callback completes it")
    func signingKeysBeforeTheCode() async throws {
        let stack = try await TokenRelayStack(name: "e2e_sign_in_follow_keys_down")
        defer { stack.stop() }
        let (id, authorize) = try await Self.start(stack)
        let location = try await stack.authorize(authorize, as: Self.alice)
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "keys", "status": 503])
        let redemptions = try await stack.emulatorCount("token_requests")
        let first = try await stack.request("GET", location, authenticated: false)
        #expect(first.status == 503, "\(first.text)")
        #expect(try await stack.emulatorCount("token_requests") == redemptions, "the code was spent before the keys were had")
        #expect(try await stack.request("GET", "/v1/sign-ins/\(id)").json["status"] as? String == "pending")

        let again = try await stack.request("GET", location, authenticated: false)
        #expect(again.status == 200, "\(again.text)")
        #expect(try await stack.request("GET", "/v1/sign-ins/\(id)").json["status"] as? String == "completed")
    }

    @Test("A sign-in whose account cannot be stored is failed with the callback's problem, not pending until it expires")
    func storeFailureIsTheOutcome() async throws {
        let stack = try await TokenRelayStack(name: "e2e_sign_in_follow_store_fail")
        defer { stack.stop() }
        let (id, authorize) = try await Self.start(stack)
        // The account's row is refused after the code was redeemed (a constraint, a bug): a
        // failure of the store, not a problem of the sign-in's own.
        try await stack.withDatabase { connection in
            try connection.execute(
                """
                CREATE FUNCTION refuse_account() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$;
                CREATE TRIGGER refuse_account BEFORE INSERT OR UPDATE ON accounts FOR EACH ROW EXECUTE FUNCTION refuse_account();
                """)
        }
        let location = try await stack.authorize(authorize, as: Self.alice)
        let callback = try await stack.request("GET", location, authenticated: false)
        #expect(callback.status == 500, "\(callback.text)")
        let followed = try await stack.request("GET", "/v1/sign-ins/\(id)?wait=2")
        #expect(followed.json["status"] as? String == "failed", "\(followed.text)")
        let problem = followed.json["problem"] as? [String: Any]
        #expect(problem?["error"] as? String == "internal")
        #expect(problem?["status"] as? Int == 500)
    }

    @Test(
        "Only the key that started a sign-in, or one with accounts:read, reads it; a problem's sign_in_id reads pending before the link is opened, then follows it"
    )
    func whoMayRead() async throws {
        let stack = try await TokenRelayStack(name: "e2e_sign_in_follow_readers")
        defer { stack.stop() }
        let writer = try await StackHelpers.createKey(stack, name: "writer", permissions: ["accounts:write", "tokens:acquire"])
        let otherWriter = try await StackHelpers.createKey(stack, name: "other", permissions: ["accounts:write"])
        let reader = try await StackHelpers.createKey(stack, name: "reader", permissions: ["accounts:read"])
        let tokensOnly = try await StackHelpers.createKey(stack, name: "tokens", permissions: ["tokens:acquire"])
        func get(_ id: String, _ key: String) async throws -> TestResponse {
            try await stack.request("GET", "/v1/sign-ins/\(id)", headers: ["Authorization": "Bearer \(key)"], authenticated: false)
        }
        let started = try await stack.request(
            "POST", "/v1/sign-ins", json: ["scopes": ["User.Read"]], headers: ["Authorization": "Bearer \(writer.key)"], authenticated: false)
        let id = try #require(started.json["sign_in_id"] as? String, "\(started.text)")
        #expect(try await get(id, writer.key).status == 200, "the starter")
        #expect(try await get(id, reader.key).status == 200, "accounts:read")
        #expect(try await get(id, otherWriter.key).status == 404, "another accounts:write key")
        #expect(try await get(id, tokensOnly.key).status == 403, "neither permission")

        // A problem's link: its sign_in_id is readable at once by the key the problem answered.
        let accountId = try await stack.signInAccountId(Self.alice)
        _ = try await stack.control("POST", "/_control/users/\(Self.alice)", json: ["revoke_refresh_tokens": true])
        let refused = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": accountId, "scopes": ["User.Read"], "force_refresh": true],
            headers: ["Authorization": "Bearer \(writer.key)"], authenticated: false)
        #expect(refused.status == 409, "\(refused.text)")
        let linkId = try #require(refused.json["sign_in_id"] as? String, "\(refused.text)")
        let link = try #require(refused.json["sign_in_url"] as? String)
        #expect(link.contains("sign_in_id=" + linkId))
        let before = try await get(linkId, writer.key)
        #expect(before.status == 200, "\(before.text)")
        #expect(before.json["status"] as? String == "pending")
        #expect(try await get(linkId, otherWriter.key).status == 404)
        #expect(try await get(linkId, reader.key).json["status"] as? String == "pending")

        let opened = try await stack.request("GET", link, authenticated: false)
        let location = try await stack.authorize(try #require(opened.headers["Location"]), as: Self.alice)
        #expect(try await stack.request("GET", location, authenticated: false).status == 200)
        let after = try await get(linkId, writer.key)
        #expect(after.json["status"] as? String == "completed", "\(after.text)")
        #expect(after.json["account_id"] as? String == accountId)
        #expect(after.json["created"] as? Bool == false)
        #expect(try await get(linkId, otherWriter.key).status == 404)
    }
}
