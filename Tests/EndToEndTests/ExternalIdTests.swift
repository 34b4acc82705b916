import Foundation
import HTTPClientBridge
import Testing
import TokenRelayTesting

/// `external_id` (behaviour §3.7, §12 Accounts; issue 10 item 6): a caller-chosen id set when a
/// sign-in starts or at import, unique per API key owner (the key's name), accepted wherever an
/// `account_id` is — `GET`/`DELETE /v1/accounts/{id}`, a silent request's `account_id`,
/// downstream `X-Account-Id` — and shown in the account object to callers of that owner only.
@Suite("external_id: chosen by the caller, unique per key owner, usable as account_id", .serialized)
struct ExternalIdTests {
    /// Values refused with 400 `invalid_request` naming `external_id`.
    static var malformed: [Any] {
        [
            "", " leading", "trailing ", String(repeating: "x", count: 129), "bell\u{7}", "new\nline", "caf\u{e9}", "acc_0123456789abcdefghijkl",
            "ACC_upper", "team/7", 42, ["crm-1"],
        ]
    }

    /// `POST /v1/sign-ins` for `username` with `key` and `extra` members.
    static func start(_ stack: TokenRelayStack, _ username: String, key: String, _ extra: [String: Any]) async throws -> TestResponse {
        var body: [String: Any] = ["scopes": ["User.Read"], "login_hint": username]
        for (name, value) in extra { body[name] = value }
        return try await stack.request("POST", "/v1/sign-ins", json: body, headers: StackHelpers.bearer(key), authenticated: false)
    }

    /// The browser's half of a started sign-in: the emulator's authorize URL, then the callback.
    /// - Returns: the callback's answer.
    static func complete(_ stack: TokenRelayStack, _ started: TestResponse) async throws -> TestResponse {
        let authorize = try #require(started.json["authorize_url"] as? String, "\(started.text)")
        let redirect = try await stack.http.execute(HTTPClientRequest(method: "GET", url: authorize))
        return try await stack.request("GET", try #require(redirect.headers["Location"]), authenticated: false)
    }

    /// Signs `username` in with `key` and `external_id`; returns the callback's account object.
    static func signIn(_ stack: TokenRelayStack, _ username: String, key: String, externalId: String?) async throws -> [String: Any] {
        let started = try await start(stack, username, key: key, externalId.map { ["external_id": $0] } ?? [:])
        #expect(started.status == 201, "\(started.text)")
        let callback = try await complete(stack, started)
        #expect(callback.status == 200, "\(callback.text)")
        return try #require(callback.json["account"] as? [String: Any], "\(callback.text)")
    }

    static func silent(_ stack: TokenRelayStack, _ accountId: String, key: String, correlationId: String = UUID().uuidString) async throws
        -> TestResponse
    {
        try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": accountId, "scopes": ["User.Read"]],
            headers: StackHelpers.bearer(key).merging(["client-request-id": correlationId]) { $1 }, authenticated: false)
    }

    static func get(_ stack: TokenRelayStack, _ id: String, key: String) async throws -> TestResponse {
        try await stack.request("GET", "/v1/accounts/\(id)", headers: StackHelpers.bearer(key), authenticated: false)
    }

    /// The step (`server_thread` or `suspended`) that answered the request named `correlationId`.
    static func step(_ stack: TokenRelayStack, _ correlationId: String) -> String? {
        PipelineParityTests.step(stack, correlationId)
    }

    @Test("Set at sign-in: shown to the key's owner, usable in GET, silent, downstream and DELETE, refused to other owners; deletion frees it")
    func signInExternalId() async throws {
        let stack = try await TokenRelayStack(name: "e2e_external_id")
        defer { stack.stop() }
        let all = ["accounts:read", "accounts:write", "tokens:acquire", "downstream:call"]
        let teamA = try await StackHelpers.createKey(stack, name: "team-a", permissions: all)
        // A rotated key: a new key of the same name owns the same external ids.
        let teamARotated = try await StackHelpers.createKey(stack, name: "team-a", permissions: all)
        let teamB = try await StackHelpers.createKey(stack, name: "team-b", permissions: all)

        let alice = try await Self.signIn(stack, "alice@contoso.example", key: teamA.key, externalId: "crm:42 alice")
        let aliceId = try #require(alice["account_id"] as? String)
        #expect(alice["external_id"] as? String == "crm:42 alice")

        // GET by external id, for both keys of the owner; another owner sees neither it nor the value.
        for key in [teamA.key, teamARotated.key] {
            let read = try await Self.get(stack, "crm:42%20alice", key: key)
            #expect(read.status == 200, "\(read.text)")
            #expect(read.json["account_id"] as? String == aliceId)
            #expect(read.json["external_id"] as? String == "crm:42 alice")
        }
        let foreign = try await Self.get(stack, "crm:42%20alice", key: teamB.key)
        #expect(foreign.status == 404)
        #expect(foreign.json["error"] as? String == "account_not_found")
        let byId = try await Self.get(stack, aliceId, key: teamB.key)
        #expect(byId.status == 200)
        #expect(byId.json["external_id"] is NSNull)
        #expect(try await Self.get(stack, aliceId, key: stack.apiKey).json["external_id"] is NSNull)
        let listed = try await stack.request("GET", "/v1/accounts", headers: StackHelpers.bearer(teamARotated.key), authenticated: false)
        let listedAlice = (listed.json["accounts"] as? [[String: Any]])?.first { $0["account_id"] as? String == aliceId }
        #expect(listedAlice?["external_id"] as? String == "crm:42 alice")

        // A silent request by external id (the key is in memory from the reads above): resolved
        // after suspension the first time, then from this replica's memory on the server thread,
        // with the same account both times; the rotated key gets the same.
        let firstId = UUID().uuidString
        let first = try await Self.silent(stack, "crm:42 alice", key: teamA.key, correlationId: firstId)
        #expect(first.status == 200, "\(first.text)")
        let firstAccount = try #require(first.json["account"] as? [String: Any])
        #expect(firstAccount["account_id"] as? String == aliceId)
        #expect(firstAccount["external_id"] as? String == "crm:42 alice")
        #expect(Self.step(stack, firstId) == "suspended")
        let secondId = UUID().uuidString
        let second = try await Self.silent(stack, "crm:42 alice", key: teamA.key, correlationId: secondId)
        #expect(second.status == 200, "\(second.text)")
        #expect(second.json["source"] as? String == "cache")
        #expect((second.json["account"] as? [String: Any])?["account_id"] as? String == aliceId)
        #expect((second.json["account"] as? [String: Any])?["external_id"] as? String == "crm:42 alice")
        #expect(Self.step(stack, secondId) == "server_thread")
        let rotated = try await Self.silent(stack, "crm:42 alice", key: teamARotated.key)
        #expect((rotated.json["account"] as? [String: Any])?["account_id"] as? String == aliceId)
        // The same cached token by account id: the owner's external id is in the account object.
        let byAccountId = try await Self.silent(stack, aliceId, key: teamA.key)
        #expect((byAccountId.json["account"] as? [String: Any])?["external_id"] as? String == "crm:42 alice")
        let foreignSilent = try await Self.silent(stack, "crm:42 alice", key: teamB.key)
        #expect(foreignSilent.status == 404)
        #expect(foreignSilent.json["error"] as? String == "account_not_found")
        #expect(foreignSilent.json["field"] as? String == "account_id")

        // Downstream as X-Account-Id.
        let me = try await stack.request(
            "GET", "/v1/downstream/graph/me", headers: StackHelpers.bearer(teamA.key).merging(["X-Account-Id": "crm:42 alice"]) { $1 },
            authenticated: false)
        #expect(me.status == 200, "\(me.text)")
        #expect(me.headers["TokenRelay-Relayed"] == "true")
        #expect(me.json["userPrincipalName"] as? String == "alice@contoso.example")
        let foreignMe = try await stack.request(
            "GET", "/v1/downstream/graph/me", headers: StackHelpers.bearer(teamB.key).merging(["X-Account-Id": "crm:42 alice"]) { $1 },
            authenticated: false)
        #expect(foreignMe.status == 404)

        // Unique per owner: taken for team-a (any of its keys), free for team-b.
        let taken = try await Self.start(stack, "bob@contoso.example", key: teamARotated.key, ["external_id": "crm:42 alice"])
        #expect(taken.status == 409, "\(taken.text)")
        #expect(taken.json["error"] as? String == "conflict")
        #expect(taken.json["field"] as? String == "external_id")
        #expect(taken.headers["Content-Type"] == "application/problem+json")
        let bob = try await Self.signIn(stack, "bob@contoso.example", key: teamB.key, externalId: "crm:42 alice")
        let bobId = try #require(bob["account_id"] as? String)
        #expect(try await Self.get(stack, "crm:42%20alice", key: teamB.key).json["account_id"] as? String == bobId)
        #expect(try await Self.get(stack, "crm:42%20alice", key: teamA.key).json["account_id"] as? String == aliceId)

        // Signing the account in again without external_id keeps it.
        let again = try await Self.signIn(stack, "alice@contoso.example", key: teamA.key, externalId: nil)
        #expect(again["account_id"] as? String == aliceId)
        #expect(try await Self.get(stack, "crm:42%20alice", key: teamA.key).json["account_id"] as? String == aliceId)

        // Refused values name the field, at sign-in.
        for value in Self.malformed {
            let refused = try await Self.start(stack, "alice@contoso.example", key: teamA.key, ["external_id": value])
            #expect(refused.status == 400, "\(value): \(refused.text)")
            #expect(refused.json["error"] as? String == "invalid_request")
            #expect(refused.json["field"] as? String == "external_id", "\(value)")
        }

        // DELETE by external id signs the account out and frees the id (memory forgets at once).
        let warm = try await Self.silent(stack, "crm:42 alice", key: teamA.key)
        #expect(warm.status == 200)
        let deleted = try await stack.request("DELETE", "/v1/accounts/crm:42%20alice", headers: StackHelpers.bearer(teamA.key), authenticated: false)
        #expect(deleted.status == 204)
        #expect(try await Self.get(stack, aliceId, key: stack.apiKey).status == 404)
        #expect(try await Self.get(stack, "crm:42%20alice", key: teamA.key).status == 404)
        #expect(try await Self.silent(stack, "crm:42 alice", key: teamA.key).status == 404)
        #expect(try await Self.get(stack, "crm:42%20alice", key: teamB.key).json["account_id"] as? String == bobId)
        let erin = try await Self.signIn(stack, "erin@contoso.example", key: teamA.key, externalId: "crm:42 alice")
        #expect(erin["external_id"] as? String == "crm:42 alice")
        let erinId = try #require(erin["account_id"] as? String)
        let erinToken = try await Self.silent(stack, "crm:42 alice", key: teamA.key)
        #expect((erinToken.json["account"] as? [String: Any])?["account_id"] as? String == erinId)

        // Audit rows keep their shape: they name the account id, never the external id.
        let audited = try await stack.withDatabase { connection in
            try connection.query("SELECT count(*)::int AS n FROM audit_events WHERE detail::text LIKE '%crm:42%' OR account_id LIKE 'crm%'").rows.first?
                .int("n")
        }
        #expect(audited == 0)
    }

    @Test("Taken while the user was at the authority: the sign-in stands, the account keeps what it had; the same account is fine")
    func conflictAtCompletion() async throws {
        let stack = try await TokenRelayStack(name: "e2e_external_id_race")
        defer { stack.stop() }
        let key = try await StackHelpers.createKey(stack, name: "team-a", permissions: ["accounts:read", "accounts:write"]).key
        // Both started while the id was free.
        let forAlice = try await Self.start(stack, "alice@contoso.example", key: key, ["external_id": "user-7"])
        let forBob = try await Self.start(stack, "bob@contoso.example", key: key, ["external_id": "user-7"])
        let forAliceAgain = try await Self.start(stack, "alice@contoso.example", key: key, ["external_id": "user-7"])
        #expect([forAlice.status, forBob.status, forAliceAgain.status] == [Int](repeating: 201, count: 3))

        let alice = try await Self.complete(stack, forAlice)
        #expect(alice.status == 200, "\(alice.text)")
        let aliceAccount = try #require(alice.json["account"] as? [String: Any])
        #expect(aliceAccount["external_id"] as? String == "user-7")
        let bob = try await Self.complete(stack, forBob)
        #expect(bob.status == 200, "\(bob.text)")
        let bobAccount = try #require(bob.json["account"] as? [String: Any])
        #expect(bobAccount["username"] as? String == "bob@contoso.example")
        #expect(bobAccount["external_id"] is NSNull)
        #expect(stack.relay.log().contains("sign_in.external_id_conflict"))
        let again = try await Self.complete(stack, forAliceAgain)
        #expect(again.status == 200, "\(again.text)")
        #expect((again.json["account"] as? [String: Any])?["external_id"] as? String == "user-7")
        #expect(try await Self.get(stack, "user-7", key: key).json["account_id"] as? String == aliceAccount["account_id"] as? String)
        #expect(try await Self.get(stack, bobAccount["account_id"] as! String, key: key).json["external_id"] is NSNull)
    }

    @Test("Set at import: 409 when another account of the owner holds it, kept by a replaced import, carried into the account it merges with")
    func importExternalId() async throws {
        let stack = try await TokenRelayStack(name: "e2e_external_id_import")
        defer { stack.stop() }
        let key = try await StackHelpers.createKey(stack, name: "migration", permissions: ["accounts:read", "accounts:write", "tokens:acquire"]).key
        let authority = "\(stack.emulator.baseURL)/\(stack.tenantId)"
        func importing(_ username: String, _ externalId: Any?) async throws -> TestResponse {
            var body: [String: Any] = ["username": username, "refresh_token": try await stack.adalRefreshToken(for: username), "authority": authority]
            body["external_id"] = externalId
            return try await stack.request("POST", "/v1/accounts/import", json: body, headers: StackHelpers.bearer(key), authenticated: false)
        }
        // Bob signed in already (no external id); his import merges into that account.
        let bob = try await Self.signIn(stack, "bob@contoso.example", key: key, externalId: nil)
        let bobId = try #require(bob["account_id"] as? String)

        let imported = try await importing("bob@contoso.example", "legacy-7")
        #expect(imported.status == 201, "\(imported.text)")
        #expect(imported.json["external_id"] as? String == "legacy-7")
        let importedId = try #require(imported.json["account_id"] as? String)
        let replaced = try await importing("bob@contoso.example", "legacy-7")
        #expect(replaced.status == 200, "\(replaced.text)")
        #expect(replaced.json["account_id"] as? String == importedId)

        let taken = try await importing("alice@contoso.example", "legacy-7")
        #expect(taken.status == 409, "\(taken.text)")
        #expect(taken.json["error"] as? String == "conflict")
        #expect(taken.json["field"] as? String == "external_id")
        let aliceAccounts = try await stack.request(
            "GET", "/v1/accounts?username=alice@contoso.example", headers: StackHelpers.bearer(key), authenticated: false)
        #expect((aliceAccounts.json["accounts"] as? [Any])?.count == 0)
        for value in Self.malformed {
            let refused = try await importing("alice@contoso.example", value)
            #expect(refused.status == 400, "\(value): \(refused.text)")
            #expect(refused.json["field"] as? String == "external_id", "\(value)")
        }

        // The first silent request by the external id redeems the import, which merges into Bob's
        // signed-in account: the external id now names the survivor.
        let first = try await Self.silent(stack, "legacy-7", key: key)
        #expect(first.status == 200, "\(first.text)")
        #expect((first.json["account"] as? [String: Any])?["account_id"] as? String == bobId)
        #expect((first.json["account"] as? [String: Any])?["external_id"] as? String == "legacy-7")
        let read = try await Self.get(stack, "legacy-7", key: key)
        #expect(read.json["account_id"] as? String == bobId)
        #expect(read.json["external_id"] as? String == "legacy-7")
    }
}
