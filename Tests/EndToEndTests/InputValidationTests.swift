import Foundation
import Testing
import TokenRelayTesting

/// Bad input is refused at the edge, naming its field, before any STS call and never as a 500
/// (behaviour §4.5, §7.4): NUL in a body, a query or a path, control characters in an imported
/// username, a thousand scopes.
@Suite("Input validation: NUL and control characters, too many scopes", .serialized)
struct InputValidationTests {
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

    /// Each was answered otherwise before (found by a new-user try): the nested body as "not
    /// valid JSON", the body on a bodiless route ignored (the tenant suspended), `limit=1%00` as
    /// an integer problem hiding the NUL, `?&&&` as 400 naming the field "", an empty
    /// `login_hint` accepted, and `/v1/downstream/graph/` as 404 "no route" where `//me` is 400.
    @Test(
        "Edges a new user found: nesting past 512 levels names its member, a body on a route that takes none is 400 naming body, empty query pieces are ignored, an empty login_hint or downstream path is 400 naming it"
    )
    func newUserEdges() async throws {
        let stack = try await TokenRelayStack(name: "e2e_new_user_edges")
        defer { stack.stop() }
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        let nested = try await stack.request(
            "POST", "/v1/sign-ins", headers: ["Content-Type": "application/json"], raw: Array(#"{"scopes":["User.Read"],"claims":\#(deep)}"#.utf8))
        #expect(nested.status == 400 && nested.json["field"] as? String == "claims", "\(nested.text)")
        #expect(nested.json["detail"] as? String == "'claims' is nested deeper than 512 levels of objects and arrays.", "\(nested.text)")
        let nestedArray = try await stack.request("POST", "/v1/sign-ins", headers: ["Content-Type": "application/json"], raw: Array(deep.utf8))
        #expect(nestedArray.status == 400 && nestedArray.json["field"] as? String == "body", "\(nestedArray.text)")

        // A body where the route takes none: refused before anything is done.
        let suspend = try await stack.request("POST", "/v1/tenants/\(stack.tenantId)/suspend", json: ["reason": "x"])
        #expect(suspend.status == 400 && suspend.json["field"] as? String == "body", "\(suspend.text)")
        #expect(suspend.json["detail"] as? String == "This route takes no request body; send none.", "\(suspend.text)")
        let tenants = try await stack.request("GET", "/v1/tenants")
        #expect(!tenants.text.contains(#""suspended":true"#), "the refused suspend suspended: \(tenants.text)")
        #expect(try await stack.request("GET", "/v1/events", headers: ["Content-Type": "text/plain"], raw: Array("x".utf8)).json["field"] as? String == "body")
        #expect(try await stack.request("POST", "/v1/tenants/\(stack.tenantId)/resume").status == 200)

        // Query pieces with neither name nor value carry nothing; a value without a name is refused.
        let pieces = try await stack.request("GET", "/v1/events?&&&limit=1&&")
        #expect(pieces.status == 200, "\(pieces.text)")
        let nameless = try await stack.request("GET", "/v1/events?=1")
        #expect(nameless.status == 400 && nameless.json["field"] as? String == "query", "\(nameless.text)")
        let nul = try await stack.request("GET", "/v1/events?limit=1%00")
        #expect(nul.status == 400 && nul.json["field"] as? String == "limit", "\(nul.text)")
        #expect(
            nul.json["detail"] as? String == "'limit' may not contain control characters (here U+0000); it must be an integer from 1 to 200.", "\(nul.text)")

        let hint = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": ""])
        #expect(hint.status == 400 && hint.json["field"] as? String == "login_hint", "\(hint.text)")

        let id = try await stack.signInAccountId()
        for path in ["/v1/downstream/graph/", "/v1/downstream/graph", "/v1/downstream/graph//me", "/v1/downstream-encoded/graph/"] {
            let answer = try await stack.request("GET", path, headers: ["X-Account-Id": id])
            #expect(answer.status == 400 && answer.json["field"] as? String == "path", "\(path): \(answer.status) \(answer.text)")
        }
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

    /// Bidirectional formatting characters (U+202E RIGHT-TO-LEFT OVERRIDE, U+2066 LEFT-TO-RIGHT
    /// ISOLATE, U+200F RIGHT-TO-LEFT MARK) were taken (found by a new-user try): the name then read
    /// as another in account lists and audit rows.
    @Test("An imported username or a login hint with control or bidirectional formatting characters is 400 naming it; nothing is imported")
    func importUsernameControlCharacters() async throws {
        let stack = try await TokenRelayStack(name: "e2e_nu_import_username")
        defer { stack.stop() }
        let bidi = ["\u{202E}bob@contoso.example", "bob\u{2066}@contoso.example", "bob@contoso.example\u{200F}"]
        for username in ["a\nb@contoso.example", "x\u{1}@contoso.example", "tab\t@contoso.example"] + bidi {
            let imported = try await stack.request(
                "POST", "/v1/accounts/import",
                json: ["username": username, "refresh_token": "adal-era-test-token", "authority": "\(stack.emulator.baseURL)/\(stack.tenantId)"])
            #expect(imported.status == 400, "\(imported.text)")
            #expect(imported.json["field"] as? String == "username")
        }
        let listed = try await stack.request("GET", "/v1/accounts")
        #expect((listed.json["accounts"] as? [Any])?.isEmpty == true, "\(listed.text)")
        for hint in bidi {
            let signIn = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": hint])
            #expect(signIn.status == 400 && signIn.json["field"] as? String == "login_hint", "\(signIn.text)")
        }
    }

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

    /// Each went to the identity platform (new-user attack): `/.default` on the app route came back
    /// a token with an empty `aud`, and was cached; `https://graph.microsoft.com/` redeemed a
    /// refresh token before failing.
    @Test("A scope naming no resource, host or permission is 400 invalid_scope naming scopes on every route that takes scopes, before any STS call")
    func malformedScopes() async throws {
        let stack = try await TokenRelayStack(name: "e2e_malformed_scopes")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let before = try await stack.emulatorCount("token_requests")
        let scopes = ["/.default", "https:///User.Read", "api://", "//x/.default", "https://graph.microsoft.com/"]
        for scope in scopes {
            let bodies: [(route: String, body: [String: Any])] = [
                ("/v1/tokens/silent", ["account_id": id, "scopes": ["User.Read", scope], "force_refresh": true]),
                ("/v1/tokens/app", ["scopes": ["User.Read", scope]]),
                ("/v1/tokens/on-behalf-of", ["assertion": "a.b.c", "scopes": ["User.Read", scope]]),
                ("/v1/sign-ins", ["scopes": ["User.Read", scope]]),
            ]
            for (route, body) in bodies {
                let refused = try await stack.request("POST", route, json: body)
                #expect(refused.status == 400, "\(route) \(scope): \(refused.text)")
                #expect(refused.json["error"] as? String == "invalid_scope", "\(route) \(scope): \(refused.text)")
                #expect(refused.json["field"] as? String == "scopes", "\(route) \(scope): \(refused.text)")
                #expect((refused.json["detail"] as? String)?.hasPrefix("scopes[1] '\(scope)'") == true, "\(route) \(scope): \(refused.text)")
            }
        }
        let resource = try await stack.request("POST", "/v1/tokens/app", json: ["resource": "https://"])
        #expect(resource.status == 400 && resource.json["field"] as? String == "resource", "\(resource.text)")
        #expect(try await stack.emulatorCount("token_requests") == before)
        // The documented forms still reach the platform.
        let graph = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["https://graph.microsoft.com/User.Read", "offline_access"]])
        #expect(graph.status == 200, "\(graph.text)")
    }
}
