import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// Accounts, operations and problem answers through the handler, in process.
@Suite("Accounts, operations and problem answers, in process", .serialized)
struct AccountsAndErrorsTests {
    @Test("Accounts list with cursor pagination, filter by username, delete twice is 204, then 404")
    func accountsLifecycle() async throws {
        let stack = try await InProcessApp(name: "inproc_accounts")
        defer { stack.stop() }
        var ids: [String] = []
        for user in ["alice@contoso.example", "bob@contoso.example"] {
            ids.append(try #require((try await stack.signIn(user)["account"] as? [String: Any])?["account_id"] as? String))
        }
        let first = try await stack.request("GET", "/v1/accounts?limit=1")
        #expect(first.status == 200)
        #expect((first.json["accounts"] as? [Any])?.count == 1)
        let cursor = try #require(first.json["next_cursor"] as? String)
        let second = try await stack.request("GET", "/v1/accounts?limit=1&cursor=\(cursor)")
        #expect((second.json["accounts"] as? [Any])?.count == 1)
        #expect(second.json["next_cursor"] is NSNull)
        let seen = [first, second].compactMap { (($0.json["accounts"] as? [[String: Any]])?.first?["account_id"]) as? String }
        #expect(Set(seen) == Set(ids))

        let filtered = try await stack.request("GET", "/v1/accounts?username=BOB@contoso.example")
        #expect((filtered.json["accounts"] as? [[String: Any]])?.map { $0["username"] as? String } == ["bob@contoso.example"])
        // Leading zeros are decimal digits (`02` was "must be an integer (decimal digits)").
        let zeros = try await stack.request("GET", "/v1/accounts?limit=01")
        #expect(zeros.status == 200 && (zeros.json["accounts"] as? [Any])?.count == 1, "\(zeros.text)")
        for limit in ["500", "%2B5", "0201", "", "1e2"] {
            let badLimit = try await stack.request("GET", "/v1/accounts?limit=\(limit)")
            #expect(badLimit.status == 400, "limit=\(limit)")
            #expect(badLimit.json["field"] as? String == "limit")
        }
        let badCursor = try await stack.request("GET", "/v1/accounts?cursor=%25%25")
        #expect(badCursor.status == 400)

        #expect(try await stack.request("DELETE", "/v1/accounts/\(ids[0])").status == 204)
        #expect(try await stack.request("DELETE", "/v1/accounts/\(ids[0])").status == 204)
        let gone = try await stack.request("GET", "/v1/accounts/\(ids[0])")
        #expect(gone.status == 404)
        #expect(gone.json["error"] as? String == "account_not_found")
        let token = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": ids[0], "scopes": ["User.Read"]])
        #expect(token.status == 404)

        let audit = try await stack.withDatabase { connection in
            try connection.query("SELECT actor, action, outcome FROM audit_events ORDER BY id").rows.map {
                [$0.string("actor") ?? "", $0.string("action") ?? "", $0.string("outcome") ?? ""]
            }
        }
        #expect(
            audit == [
                [stack.apiKeyId, "sign_in.completed", "success"], [stack.apiKeyId, "sign_in.completed", "success"],
                [stack.apiKeyId, "account.deleted", "deleted"], [stack.apiKeyId, "account.deleted", "absent"],
            ])
    }

    @Test("Bad input gets a problem+json naming the field; unknown routes 404; wrong methods 405 with Allow")
    func problems() async throws {
        let stack = try await InProcessApp(name: "inproc_problems")
        defer { stack.stop() }
        let unauthenticated = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": "x", "scopes": ["User.Read"]], authenticated: false)
        #expect(unauthenticated.status == 401)
        #expect(unauthenticated.headers["WWW-Authenticate"] == #"Bearer realm="tokenrelay""#)
        let wrongKey = try await stack.request("GET", "/v1/accounts", headers: ["Authorization": "Bearer trk_abcdefgh_nope"], authenticated: false)
        #expect(wrongKey.status == 401)

        let notFound = try await stack.request("GET", "/v1/nothing")
        #expect(notFound.status == 404)
        #expect(notFound.json["error"] as? String == "not_found")
        let wrongMethod = try await stack.request("PUT", "/v1/tokens/silent")
        #expect(wrongMethod.status == 405)
        #expect(wrongMethod.headers["Allow"] == "POST")

        let wrongType = try await stack.request("POST", "/v1/tokens/silent", headers: ["Content-Type": "text/plain"])
        #expect(wrongType.status == 415)
        #expect(wrongType.json["error"] as? String == "unsupported_media_type")

        var badJSON = try await stack.request(
            "POST", "/v1/tokens/silent", body: Array("{not json".utf8), headers: ["Content-Type": "application/json"])
        #expect(badJSON.status == 400)
        badJSON = try await stack.request(
            "POST", "/v1/tokens/silent", body: Array(repeating: 32, count: 70_000), headers: ["Content-Type": "application/json"])
        #expect(badJSON.status == 413)

        let twoSelectors = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": "a", "username": "b", "scopes": ["User.Read"]])
        #expect(twoSelectors.status == 400)
        #expect(twoSelectors.json["field"] as? String == "account_id")
        let onlyOIDC = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": "a", "scopes": ["openid", "profile"]])
        #expect(onlyOIDC.status == 400)
        #expect(onlyOIDC.json["error"] as? String == "invalid_scope")
        let twoResources = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": "a", "scopes": ["User.Read", "https://management.azure.com/user_impersonation"]])
        #expect(twoResources.json["error"] as? String == "invalid_scope")
        let unknownField = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": "a", "scopes": ["User.Read"], "scope": "x"])
        #expect(unknownField.status == 400)
        #expect(unknownField.json["field"] as? String == "scope")
        let badAuthority = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": "a", "scopes": ["User.Read"], "authority": "https://evil.example/tenant"])
        #expect(badAuthority.status == 400)
        #expect(badAuthority.json["error"] as? String == "invalid_authority")
        let badTimeout = try await stack.request("GET", "/v1/accounts", headers: ["Request-Timeout": "500"])
        #expect(badTimeout.status == 400)
        #expect(badTimeout.json["field"] as? String == "Request-Timeout")

        let echoed = try await stack.request("GET", "/v1/nothing", headers: ["client-request-id": "0a0b0c0d-0000-4000-8000-000000000001"])
        #expect(echoed.headers["client-request-id"] == "0a0b0c0d-0000-4000-8000-000000000001")
        #expect(echoed.json["correlation_id"] as? String == "0a0b0c0d-0000-4000-8000-000000000001")
    }

    /// Found by a new-user attack: the silent route looked a malformed `tenant_id` (or a 5,000-byte
    /// `username`) up and answered 404 naming `username`, where the accounts list refused the same
    /// value naming `tenant_id`; an unknown account in the path was a 404 naming nothing.
    @Test("username and tenant_id are held to one rule on the accounts list and the silent route; an unknown path account_id is named")
    func lookupMembersAndPathParameters() async throws {
        let stack = try await InProcessApp(name: "inproc_lookup_members")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        func both(_ member: String, _ value: String) async throws -> (silent: TestResponse, list: TestResponse) {
            var body: [String: Any] = ["username": "alice@contoso.example", "scopes": ["User.Read"]]
            body[member] = value
            let silent = try await stack.request("POST", "/v1/tokens/silent", json: body)
            let encoded = try #require(value.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
            let list = try await stack.request("GET", "/v1/accounts?\(member)=\(encoded)")
            return (silent, list)
        }
        for (member, value) in [
            ("tenant_id", "x y"), ("tenant_id", "\u{202E}"), ("tenant_id", String(repeating: "a", count: 3000)),
            ("username", String(repeating: "u", count: 5000)), ("username", "alice\u{7}@contoso.example"),
        ] {
            let (silent, list) = try await both(member, value)
            let shown = "\(member)=\(value.prefix(8).debugDescription)…"
            #expect(silent.status == 400 && silent.json["field"] as? String == member, "\(shown): \(silent.status) \(silent.text.prefix(300))")
            #expect(list.status == 400 && list.json["field"] as? String == member, "\(shown): \(list.status) \(list.text.prefix(300))")
            #expect(silent.json["detail"] as? String == list.json["detail"] as? String, "\(shown): \(silent.text.prefix(300)) / \(list.text.prefix(300))")
        }
        // Valid values still reach the lookup: a tenant id and a domain name.
        let (byId, listById) = try await both("tenant_id", stack.tenantId)
        #expect(byId.status == 200 && listById.status == 200, "\(byId.text.prefix(300))")
        let (byDomain, _) = try await both("tenant_id", "contoso.example")
        #expect(byDomain.status != 400, "\(byDomain.text.prefix(300))")

        let unknown = try await stack.request("GET", "/v1/accounts/acc_nope")
        #expect(unknown.status == 404 && unknown.json["error"] as? String == "account_not_found", "\(unknown.text)")
        #expect(unknown.json["field"] as? String == "account_id", "\(unknown.text)")
        #expect(try await stack.request("GET", "/v1/accounts/\(id)").status == 200)
    }

    @Test("Sign-in callback refuses unknown, replayed and declined states")
    func callbackProblems() async throws {
        let stack = try await InProcessApp(name: "inproc_callback")
        defer { stack.stop() }
        let unknown = try await stack.request("GET", "/v1/sign-ins/callback?code=abc&state=nope", authenticated: false)
        #expect(unknown.status == 400)
        #expect(unknown.json["field"] as? String == "state")

        let started = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": "alice@contoso.example"])
        let authorize = try #require(started.json["authorize_url"] as? String)
        #expect(authorize.contains("code_challenge_method=S256"))
        let redirect = try await stack.http.execute(.init(method: "GET", url: authorize))
        let location = try #require(redirect.headers["Location"])
        #expect(try await stack.request("GET", location, authenticated: false).status == 200)
        let replay = try await stack.request("GET", location, authenticated: false)
        #expect(replay.status == 400)

        _ = try await stack.control("POST", "/_control/users/bob@contoso.example", json: ["decline_consent": true])
        let declined = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": "bob@contoso.example"])
        let declinedRedirect = try await stack.http.execute(.init(method: "GET", url: try #require(declined.json["authorize_url"] as? String)))
        let canceled = try await stack.request("GET", try #require(declinedRedirect.headers["Location"]), authenticated: false)
        #expect(canceled.status == 400)
        #expect(canceled.json["error"] as? String == "user_canceled")
        #expect(canceled.json["sts_error_codes"] as? [Int] == [65004])

        // The configuration changed while the user was at the authority: a problem, not a 500.
        let pending = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": "alice@contoso.example"])
        let pendingRedirect = try await stack.http.execute(.init(method: "GET", url: try #require(pending.json["authorize_url"] as? String)))
        try await stack.withDatabase { try $0.execute("UPDATE sign_ins SET authority = 'https://untrusted.example/tenant'") }
        let untrusted = try await stack.request("GET", try #require(pendingRedirect.headers["Location"]), authenticated: false)
        #expect(untrusted.status == 400, "\(untrusted.text)")
        #expect(untrusted.json["error"] as? String == "invalid_authority")

        let badPrompt = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "prompt": "always"])
        #expect(badPrompt.json["field"] as? String == "prompt")
        let openRedirect = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "redirect_after": "https://evil.example/"])
        #expect(openRedirect.status == 400)
        #expect(openRedirect.json["field"] as? String == "redirect_after")
    }

    @Test("Health, readiness and metrics answer without an API key in the documented shapes")
    func operations() async throws {
        let stack = try await InProcessApp(name: "inproc_ops")
        defer { stack.stop() }
        let health = try await stack.request("GET", "/healthz", authenticated: false)
        #expect(health.status == 200)
        #expect(health.headers["Content-Type"] == "application/health+json")
        #expect(health.json["status"] as? String == "pass")
        let ready = try await stack.request("GET", "/readyz", authenticated: false)
        #expect(ready.status == 200, "\(ready.text)")
        let checks = try #require(ready.json["checks"] as? [String: Any])
        let database = try #require((checks["postgresql:responseTime"] as? [[String: Any]])?.first)
        #expect(database["status"] as? String == "pass")
        #expect(database["observedUnit"] as? String == "ms")
        _ = try await stack.request("GET", "/v1/accounts")
        let metrics = try await stack.request("GET", "/metrics", authenticated: false)
        #expect(metrics.status == 200)
        #expect(metrics.text.contains(#"tokenrelay_http_requests_total{route="/v1/accounts",status="200"} 1"#))
        #expect(metrics.text.contains("tokenrelay_db_pool_connections"))
    }

    /// `account_id: ""` named no account and was looked up: 404 `account_not_found` (found by
    /// the new-user try). An empty identifier is a malformed request.
    @Test("An empty account_id or tenant_id is 400 naming it on sign-ins and silent requests")
    func emptyIdentifiers() async throws {
        let stack = try await InProcessApp(name: "inproc_empty_identifiers")
        defer { stack.stop() }
        let signIn = try await stack.request("POST", "/v1/sign-ins", json: ["account_id": "", "scopes": ["User.Read"]])
        #expect(signIn.status == 400 && signIn.json["field"] as? String == "account_id", "\(signIn.text)")
        let silent = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["username": "alice@contoso.example", "tenant_id": "", "scopes": ["User.Read"]])
        #expect(silent.status == 400 && silent.json["field"] as? String == "tenant_id", "\(silent.text)")
    }
}
