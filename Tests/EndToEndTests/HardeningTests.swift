import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// Bad input found by trying the service as a new user would; each test failed before its fix.
@Suite("Hardening against bad input", .serialized)
struct HardeningTests {
    @Test("A thousand scopes is 400 invalid_scope before any STS call (it used to redeem, fail to cache and lose the rotation)")
    func tooManyScopes() async throws {
        let stack = try await TokenRelayStack(name: "e2e_many_scopes")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let before = try await stack.emulatorCount("token_requests")
        let refused = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": (0..<1000).map { "S\($0)" }])
        #expect(refused.status == 400)
        #expect(refused.json["error"] as? String == "invalid_scope")
        #expect(refused.json["field"] as? String == "scopes")
        #expect(try await stack.emulatorCount("token_requests") == before)
        let signIn = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": (0..<1000).map { "S\($0)" }])
        #expect(signIn.status == 400)
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

    @Test("%00 in a path does not cut it short: no account or Graph resource is reached through it")
    func percentZeroInPaths() async throws {
        let stack = try await TokenRelayStack(name: "e2e_percent_zero")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        #expect(try await stack.request("GET", "/v1/accounts/\(id)").status == 200)
        let truncated = try await stack.request("GET", "/v1/accounts/\(id)%00garbage")
        #expect(truncated.status == 404, "\(truncated.text)")
        let me = try await stack.request("GET", "/v1/downstream/graph/me%00x", headers: ["X-Account-Id": id])
        #expect(me.json["userPrincipalName"] == nil, "the relay called /me: \(me.status) \(me.text)")
    }

    @Test("NUL characters in input are 400 naming the field, never 500")
    func nulCharacters() async throws {
        let stack = try await TokenRelayStack(name: "e2e_nul")
        defer { stack.stop() }
        let body = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": "acc\u{0}x", "scopes": ["User.Read"]])
        #expect(body.status == 400, "\(body.text)")
        let query = try await stack.request("GET", "/v1/accounts?username=%00")
        #expect(query.status == 400)
        #expect(query.json["field"] as? String == "username")
        let unknownParameter = try await stack.request("GET", "/v1/accounts?bogus=1")
        #expect(unknownParameter.status == 400)
        #expect(unknownParameter.json["field"] as? String == "bogus")
        let longHint = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": String(repeating: "a", count: 300)])
        #expect(longHint.status == 400)
        #expect(longHint.json["field"] as? String == "login_hint")
    }

    @Test("Downstream paths cannot climb out of the API's base URL, nor hold empty segments")
    func downstreamDotSegments() async throws {
        let stack = try await TokenRelayStack(name: "e2e_dotdot")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let before = try await stack.emulatorCount("graph_requests")
        // Empty segments too (new-user attack: routing dropped them, and `me//messages` was relayed
        // as `/v1.0/me/messages`, `me/` as `/v1.0/me`).
        for path in [
            "/v1/downstream/graph/..%2F..%2Fetc", "/v1/downstream/graph/me/%2e%2e/%2e%2e/x", "/v1/downstream/graph/%2E%2E/x",
            "/v1/downstream/graph/me//messages", "/v1/downstream/graph//me", "/v1/downstream/graph/me/",
            // Dot segments with a `;` parameter or behind a `\\` (strict at the edges: these reached
            // the API as `/v1.0/..;/beta/x` and `/v1.0/..%5Cbeta`, which Tomcat and IIS read as `..`).
            "/v1/downstream/graph/%2e%2e;/beta/x", "/v1/downstream/graph/..%3b/beta/x", "/v1/downstream/graph/..;/secret",
            "/v1/downstream/graph/..%5cbeta", "/v1/downstream/graph/me/..%5C..%5Cbeta", "/v1/downstream/graph/.;x/me",
            "/v1/downstream/graph/me%5C..",
            // The generated clients' form (decoded once), hiding the same behind one more encoding.
            "/v1/downstream-encoded/graph/..%2F..%2Fetc", "/v1/downstream-encoded/graph/me%2F%252e%252e%2Fx",
            "/v1/downstream-encoded/graph/me%2F%2Fmessages", "/v1/downstream-encoded/graph/me%2F", "/v1/downstream-encoded/graph/x%2500",
        ] {
            let refused = try await stack.request("GET", path, headers: ["X-Account-Id": id])
            #expect(refused.status == 400, "\(path): \(refused.text)")
            #expect(refused.json["field"] as? String == "path")
        }
        #expect(try await stack.emulatorCount("graph_requests") == before)
    }

    @Test("An encoded '/' in a downstream path stays inside its segment on the way to the API (new-user attack: users%2Falice was relayed as users/alice)")
    func downstreamEncodedSlash() async throws {
        let stack = try await TokenRelayStack(name: "e2e_encoded_slash")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        // Graph's `users/{id | userPrincipalName}`: the emulator decodes the one segment it got.
        let user = try await stack.request("GET", "/v1/downstream/graph/users/alice%40contoso.example%2Fx%25y", headers: ["X-Account-Id": id])
        #expect(user.status == 404, "\(user.text)")
        let requests = try await stack.control("GET", "/_control/graph-requests").json["requests"] as? [[String: Any]] ?? []
        #expect(requests.map { $0["path"] as? String } == ["/v1.0/users/alice@contoso.example%2Fx%25y"])
        // Dot segments hidden behind an encoded '/' are refused like plain ones, before any call.
        let hidden = try await stack.request("GET", "/v1/downstream/graph/me%2F..%2F..%2Fbeta%2Fme", headers: ["X-Account-Id": id])
        #expect(hidden.status == 400, "\(hidden.text)")
        #expect(hidden.json["field"] as? String == "path")
        #expect(try await stack.emulatorCount("graph_requests") == 1)
    }

    @Test("Another tenant's authority never gets the home tenant's cached token; another cloud is invalid_authority")
    func authorityPartitionsTheCache() async throws {
        let stack = try await TokenRelayStack(name: "e2e_realm")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let home = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
        #expect(home.json["source"] as? String == "cache")
        let otherTenant = try await stack.request(
            "POST", "/v1/tokens/silent",
            json: [
                "account_id": id, "scopes": ["User.Read"], "authority": "\(stack.emulator.baseURL)/22222222-2222-2222-2222-222222222222",
            ])
        #expect(otherTenant.json["source"] as? String != "cache", "\(otherTenant.text)")
        #expect(otherTenant.json["access_token"] as? String != home.json["access_token"] as? String)
        let otherCloud = try await stack.request(
            "POST", "/v1/tokens/silent",
            json: [
                "account_id": id, "scopes": ["User.Read"], "authority": "https://login.microsoftonline.us/22222222-2222-2222-2222-222222222222",
            ])
        #expect(otherCloud.status == 400)
        #expect(otherCloud.json["error"] as? String == "invalid_authority")
    }

    @Test("A home_account_id signed in through two clouds is ambiguous; a no longer trusted stored authority is not a 500")
    func homeAccountAmbiguityAndStaleAuthority() async throws {
        let stack = try await TokenRelayStack(name: "e2e_home")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let home = try #require(try await stack.request("GET", "/v1/accounts/\(id)").json["home_account_id"] as? String)
        try await stack.withDatabase { connection in
            try connection.query(
                """
                INSERT INTO accounts (account_id, client_id, environment, home_account_id, realm, authority, authority_type)
                SELECT 'acc_other_cloud', client_id, 'login.microsoftonline.us', home_account_id, realm,
                       'https://login.microsoftonline.us/' || realm, authority_type FROM accounts WHERE account_id = $1
                """, [.text(id)])
        }
        let ambiguous = try await stack.request("POST", "/v1/tokens/silent", json: ["home_account_id": home, "scopes": ["User.Read"]])
        #expect(ambiguous.status == 409, "\(ambiguous.text)")
        #expect(ambiguous.json["error"] as? String == "ambiguous_account")
        #expect(Set(ambiguous.json["account_ids"] as? [String] ?? []) == [id, "acc_other_cloud"])

        try await stack.withDatabase { connection in
            try connection.query("UPDATE accounts SET authority = 'https://untrusted.example/tenant' WHERE account_id = $1", [.text(id)])
        }
        let stale = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(stale.status == 409, "\(stale.text)")
        #expect(stale.json["error"] as? String == "interaction_required")
    }

    @Test("The body's correlation_id names the answer in body and header on every path; /healthz echoes client-request-id")
    func correlationIds() async throws {
        let stack = try await TokenRelayStack(name: "e2e_correlation")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        for force in [false, true] {
            let answer = try await stack.request(
                "POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": force, "correlation_id": "corr-body-\(force)"])
            #expect(answer.json["correlation_id"] as? String == "corr-body-\(force)")
            #expect(answer.headers["client-request-id"] == "corr-body-\(force)")
        }
        let problem = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": "acc_missing", "scopes": ["User.Read"], "correlation_id": "corr-problem"])
        #expect(problem.status == 404)
        #expect(problem.json["correlation_id"] as? String == "corr-problem")
        #expect(problem.headers["client-request-id"] == "corr-problem")
        let health = try await stack.request("GET", "/healthz", headers: ["client-request-id": "corr-health"], authenticated: false)
        #expect(health.headers["client-request-id"] == "corr-health")
    }

    @Test("A well-formed traceparent is logged with the request, on both steps; a malformed one is not")
    func traceparentLogged() async throws {
        let stack = try await TokenRelayStack(name: "e2e_traceparent")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let body: [String: Any] = ["account_id": id, "scopes": ["User.Read"]]
        let refreshed = try await stack.request("POST", "/v1/tokens/silent", json: body, headers: ["traceparent": trace, "client-request-id": "trace-1"])
        let cached = try await stack.request("POST", "/v1/tokens/silent", json: body, headers: ["traceparent": trace, "client-request-id": "trace-2"])
        let malformed = try await stack.request(
            "POST", "/v1/tokens/silent", json: body, headers: ["traceparent": "00-zz-01", "client-request-id": "trace-3"])
        #expect(refreshed.status == 200 && cached.status == 200 && malformed.status == 200)
        try await Task.sleep(for: .milliseconds(50))
        let lines = stack.relay.log().split(separator: "\n").filter { $0.contains("\"request.completed\"") }
        func line(_ id: String) -> Substring? { lines.last { $0.contains(id) } }
        #expect(line("trace-1")?.contains(#""trace.parent":"\#(trace)""#) == true, "\(String(describing: line("trace-1")))")
        #expect(line("trace-2")?.contains(#""trace.parent":"\#(trace)""#) == true)
        #expect(line("trace-2")?.contains(#""request.step":"server_thread""#) == true)
        #expect(line("trace-3").map { !$0.contains("trace.parent") } == true)
    }

    @Test("A database failure is a 500 whose cause (libpq function, SQLSTATE) is logged, never shown")
    func databaseFailureLogged() async throws {
        let stack = try await TokenRelayStack(name: "e2e_db_fail")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        try await stack.withDatabase { connection in
            try connection.execute(
                """
                CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'secret detail %', OLD.account_id; END $$;
                CREATE TRIGGER refuse_delete BEFORE DELETE ON accounts FOR EACH ROW EXECUTE FUNCTION refuse();
                """)
        }
        let failed = try await stack.request("DELETE", "/v1/accounts/\(id)", headers: ["client-request-id": "corr-db-fail"])
        #expect(failed.status == 500)
        #expect(failed.json["error"] as? String == "internal")
        #expect(!failed.text.contains("secret detail"))
        let log = stack.relay.log()
        let line = try #require(log.split(separator: "\n").first { $0.contains("request.failed") && $0.contains("corr-db-fail") })
        #expect(line.contains("PQexecParams"))
        #expect(line.contains("P0001"))
        #expect(!log.contains("secret detail"))
    }

    @Test("With the database unreachable, readiness fails and token requests answer 503 with Retry-After")
    func databaseUnreachable() async throws {
        let stack = try await TokenRelayStack(
            name: "e2e_db_down",
            environment: ["TOKENRELAY_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2", "TOKENRELAY_MIGRATE_ON_START": "false"])
        defer { stack.stop() }
        let health = try await stack.request("GET", "/healthz", authenticated: false)
        #expect(health.status == 200)
        let ready = try await stack.request("GET", "/readyz", authenticated: false)
        #expect(ready.status == 503)
        #expect(ready.json["status"] as? String == "fail")
        let token = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": "acc_x", "scopes": ["User.Read"]])
        #expect(token.status == 503, "\(token.text)")
        #expect(token.json["error"] as? String == "upstream_unavailable")
        #expect(token.headers["Retry-After"] != nil)
    }

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
