import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// The refresh token the STS rotated is stored whatever fails after its answer (the transaction's
/// COMMIT, the access token's cache write, the caller's deadline), and a refresh that learns its
/// token is dead deletes no newer one (behaviour §1.6, §2.6). The emulator runs with no rotation grace where it matters,
/// so only the newest refresh token works and a lost rotation shows.
@Suite("A refresh token is never lost: a failed commit or cache write, a short deadline, a sign-in during a dying refresh", .serialized)
struct RefreshTokenNeverLostTests {
    @Test("A rotation whose transaction fails at COMMIT still stores the rotated refresh token")
    func rotationSurvivesCommitFailure() async throws {
        let stack = try await TokenRelayStack(name: "e2e_commit_fail", emulatorArguments: ["--rotation-grace-seconds", "0"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        // A deferred constraint trigger fails the whole transaction at COMMIT, after the STS answered.
        try await stack.withDatabase { connection in
            try connection.execute(
                """
                CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused at commit'; END $$;
                CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER INSERT OR UPDATE ON access_tokens
                  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse();
                """)
        }
        let first = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(first.status == 200, "\(first.text)")
        try await stack.withDatabase { try $0.execute("DROP TRIGGER refuse_at_commit ON access_tokens") }
        // With no rotation grace only the newest refresh token works: it was stored.
        let second = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(second.status == 200, "\(second.text)")
        #expect(stack.relay.log().contains("token.rotation_stored_on_retry"))
    }

    @Test("An import whose first redemption cannot commit keeps the rotated refresh token")
    func importRotationSurvivesCommitFailure() async throws {
        let stack = try await TokenRelayStack(name: "e2e_import_commit_fail", emulatorArguments: ["--rotation-grace-seconds", "0"])
        defer { stack.stop() }
        let adalToken = try await stack.adalRefreshToken(for: "bob@contoso.example")
        let imported = try await stack.request(
            "POST", "/v1/accounts/import",
            json: ["username": "bob@contoso.example", "refresh_token": adalToken, "authority": "\(stack.emulator.baseURL)/organizations"])
        #expect(imported.status == 201, "\(imported.text)")
        let id = try #require(imported.json["account_id"] as? String)
        // A deferred constraint trigger fails the import's transaction at COMMIT, after the STS rotated.
        try await stack.withDatabase { connection in
            try connection.execute(
                """
                CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused at commit'; END $$;
                CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER UPDATE ON accounts
                  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse();
                """)
        }
        let first = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
        #expect(first.status != 200, "\(first.text)")
        try await stack.withDatabase { try $0.execute("DROP TRIGGER refuse_at_commit ON accounts") }
        // With no rotation grace only the newest refresh token works: the rotated one was stored.
        let second = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
        #expect(second.status == 200, "\(second.text)")
        #expect(stack.relay.log().contains("token.rotation_stored_on_retry"))
    }

    @Test("When caching the new access token fails, the rotated refresh token is still stored")
    func rotationSurvivesCacheWriteFailure() async throws {
        let stack = try await TokenRelayStack(name: "e2e_cache_fail", emulatorArguments: ["--rotation-grace-seconds", "0"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        try await stack.withDatabase { connection in
            try connection.execute(
                """
                CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by test'; END $$;
                CREATE TRIGGER refuse_access_tokens BEFORE INSERT OR UPDATE ON access_tokens FOR EACH ROW EXECUTE FUNCTION refuse();
                """)
        }
        let first = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(first.status == 200, "\(first.text)")
        try await stack.withDatabase { try $0.execute("DROP TRIGGER refuse_access_tokens ON access_tokens") }
        // With no rotation grace, only the newest refresh token works: this proves it was stored.
        let second = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(second.status == 200, "\(second.text)")
        #expect(stack.relay.log().contains("token.rotation_write_failed"))
    }

    @Test("A Request-Timeout shorter than the STS's answer never loses the rotated refresh token")
    func shortDeadlineKeepsRotation() async throws {
        // No rotation grace: only the newest refresh token works, so a lost rotation shows.
        let stack = try await TokenRelayStack(name: "e2e_nu_short_deadline", emulatorArguments: ["--rotation-grace-seconds", "0"])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let fault = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "latency_ms": 1500, "count": 1])
        #expect(fault.status == 201)
        let refresh: [String: Any] = ["account_id": id, "scopes": ["User.Read"], "force_refresh": true]
        let short = try await stack.request("POST", "/v1/tokens/silent", json: refresh, headers: ["Request-Timeout": "0.3"])
        #expect([503, 504].contains(short.status), "\(short.text)")
        #expect(short.json["error"] as? String == "upstream_unavailable")
        // The redemption the STS answered late was kept: the refresh token it rotated works (this
        // request may join the redemption still in flight; the next one redeems on its own).
        for _ in 0..<2 {
            let next = try await stack.request("POST", "/v1/tokens/silent", json: refresh)
            #expect(next.status == 200, "\(next.text)")
        }
        let chain = try await stack.control("GET", "/_control/stats")
        let alice = ((chain.json["refresh_token_chain"] as? [String: Any])?["alice@contoso.example"] as? [String: Any]) ?? [:]
        #expect(alice["rejected_superseded"] as? Int == 0, "\(chain.text)")
    }

    @Test("A sign-in whose code is redeemed while PostgreSQL is away is stored, refresh token and all, when it returns within the callback's deadline")
    func signInSurvivesOutage() async throws {
        try await PrivatePostgres.withServer { try await signInSurvivesOutage(on: $0) }
    }

    private func signInSurvivesOutage(on postgres: PrivatePostgres) async throws {
        let stack = try await TokenRelayStack(name: "e2e_signin_outage", emulatorArguments: ["--rotation-grace-seconds", "0"], databaseURL: postgres.url)
        defer { stack.stop() }
        let user = "alice@contoso.example"
        let started = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": user])
        let signInId = try #require(started.json["sign_in_id"] as? String, "\(started.text)")
        let location = try await stack.authorize(try #require(started.json["authorize_url"] as? String), as: user)
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["latency_ms": 3000])
        let callback = Task { try await stack.request("GET", location, authenticated: false) }
        // The callback used the state up and waits for the STS; the database goes away before
        // the STS answers, and comes back after it did.
        let redeeming = try await ReplicaTests.within(10) {
            try await stack.withDatabase { connection in
                try connection.query("SELECT 1 FROM sign_ins WHERE sign_in_id = $1 AND status = 'redeeming'", [.text(signInId)]).rows.first != nil
            }
        }
        #expect(redeeming != nil, "the callback never took the sign-in")
        try await postgres.stop()
        try await Task.sleep(for: .seconds(4))
        try await postgres.start()
        let answer = try await callback.value
        #expect(answer.status == 200, "the sign-in was lost with the outage: \(answer.text)")
        let accountId = try #require((answer.json["account"] as? [String: Any])?["account_id"] as? String)
        #expect(stack.relay.log().contains("sign_in.stored_on_retry"))

        let followed = try await stack.request("GET", "/v1/sign-ins/\(signInId)")
        #expect(followed.json["status"] as? String == "completed", "\(followed.text)")
        #expect(followed.json["account_id"] as? String == accountId)
        // With no rotation grace, only a stored refresh token redeems.
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["latency_ms": 0])
        let refreshed = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": accountId, "scopes": ["User.Read"], "force_refresh": true])
        #expect(refreshed.status == 200, "\(refreshed.text)")
        #expect(refreshed.json["source"] as? String == "refresh")
    }

    @Test("A refresh that learns its token is dead cannot delete the token of a sign-in that finished meanwhile")
    func signInDuringDyingRefresh() async throws {
        let stack = try await TokenRelayStack(name: "e2e_signin_race")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: [
                "endpoint": "token", "username": "alice@contoso.example", "latency_ms": 1500, "status": 400, "error": "invalid_grant",
                "error_codes": [700082], "suberror": "bad_token", "error_description": "The refresh token has expired due to inactivity.",
            ])
        let requestsBefore = try await stack.emulatorCount("token_requests")
        async let dying = stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        // Ordering only: the refresh's redemption reaches the STS (and takes the fault) first.
        for _ in 0..<200 where try await stack.emulatorCount("token_requests") == requestsBefore {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(try await stack.signInAccountId() == id)
        #expect(try await dying.status == 409)
        let after = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(after.status == 200, "the new sign-in's refresh token was lost: \(after.text)")
        #expect(try await stack.request("GET", "/v1/accounts/\(id)").json["state"] as? String == "active")
    }
}
