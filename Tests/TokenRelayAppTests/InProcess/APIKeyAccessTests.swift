import Foundation
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore
import TokenRelayTesting

/// API keys through the handler, in process (behaviour §7, §11, §12 Permissions): every route refuses
/// a missing, malformed, revoked or under-privileged key; tenant and scope limits; the per-key
/// rate limit. Keys are made by the call `token-relay api-keys create` makes (the CLI's own
/// output is `CommandLineTests`').
@Suite("API key access, in process", .serialized)
struct APIKeyAccessTests {
    static let allPermissions = ["tokens:acquire", "accounts:read", "accounts:write", "downstream:call", "admin"]
    static let otherTenant = "22222222-2222-2222-2222-222222222222"

    /// One documented operation: how to call it and what it needs (nil: no API key).
    struct Operation: Sendable, CustomStringConvertible {
        let method: String
        let template: String
        let permission: String?
        /// Another permission that also admits the key (a route of `RouteAccess.requiresAny`).
        var alternative: String? = nil
        var description: String { "\(method) \(template)" }
    }

    /// Every operation of openapi.yaml; `allRoutesCovered` fails when a route is missing here.
    static let operations: [Operation] = [
        Operation(method: "POST", template: "/v1/sign-ins", permission: "accounts:write"),
        Operation(method: "GET", template: "/v1/sign-ins/callback", permission: nil),
        Operation(method: "GET", template: "/v1/accounts", permission: "accounts:read"),
        Operation(method: "GET", template: "/v1/accounts/{account_id}", permission: "accounts:read"),
        Operation(method: "DELETE", template: "/v1/accounts/{account_id}", permission: "accounts:write"),
        Operation(method: "POST", template: "/v1/tokens/silent", permission: "tokens:acquire"),
        Operation(method: "POST", template: "/v1/tokens/app", permission: "tokens:acquire"),
        Operation(method: "POST", template: "/v1/tokens/on-behalf-of", permission: "tokens:acquire"),
        Operation(method: "POST", template: "/v1/accounts/import", permission: "accounts:write"),
        Operation(method: "GET", template: "/v1/downstream/{api}/{path}", permission: "downstream:call"),
        Operation(method: "POST", template: "/v1/downstream/{api}/{path}", permission: "downstream:call"),
        Operation(method: "PUT", template: "/v1/downstream/{api}/{path}", permission: "downstream:call"),
        Operation(method: "PATCH", template: "/v1/downstream/{api}/{path}", permission: "downstream:call"),
        Operation(method: "DELETE", template: "/v1/downstream/{api}/{path}", permission: "downstream:call"),
        Operation(method: "GET", template: "/v1/downstream-encoded/{api}/{path}", permission: "downstream:call"),
        Operation(method: "POST", template: "/v1/downstream-encoded/{api}/{path}", permission: "downstream:call"),
        Operation(method: "PUT", template: "/v1/downstream-encoded/{api}/{path}", permission: "downstream:call"),
        Operation(method: "PATCH", template: "/v1/downstream-encoded/{api}/{path}", permission: "downstream:call"),
        Operation(method: "DELETE", template: "/v1/downstream-encoded/{api}/{path}", permission: "downstream:call"),
        Operation(method: "GET", template: "/v1/sign-ins/start", permission: nil),
        // The starter (`accounts:write`) or any `accounts:read` key (behaviour §3.9).
        Operation(method: "GET", template: "/v1/sign-ins/{sign_in_id}", permission: "accounts:read", alternative: "accounts:write"),
        Operation(method: "GET", template: "/v1/events", permission: "accounts:read"),
        Operation(method: "GET", template: "/v1/audit", permission: "admin"),
        Operation(method: "GET", template: "/healthz", permission: nil),
        Operation(method: "GET", template: "/readyz", permission: nil),
        Operation(method: "GET", template: "/metrics", permission: nil),
        Operation(method: "GET", template: "/v1/tenants", permission: "admin"),
        Operation(method: "POST", template: "/v1/tenants/{tenant_id}/suspend", permission: "admin"),
        Operation(method: "POST", template: "/v1/tenants/{tenant_id}/resume", permission: "admin"),
    ]

    // MARK: Helpers

    /// Creates a key as `api-keys create` does; returns (api_key, key_id).
    static func createKey(
        _ stack: InProcessApp, permissions: [String], tenants: [String] = [], scopes: [String] = []
    ) async throws -> (key: String, keyId: String) {
        try await stack.createKey(permissions: permissions, tenants: tenants, scopes: scopes)
    }

    /// Sends `operation` with `authorization` (nil: no header) and a body/headers that make sense for it.
    static func call(_ stack: InProcessApp, _ operation: Operation, authorization: String?, accountId: String) async throws -> TestResponse {
        // DELETE names an account that does not exist (204 too), so the others keep theirs.
        var path = operation.template.replacingOccurrences(of: "{account_id}", with: operation.method == "DELETE" ? "acc_absent" : accountId)
            .replacingOccurrences(of: "{api}/{path}", with: "graph/me")
            // A tenant no account is of: suspending it changes nothing the other operations use.
            .replacingOccurrences(of: "{tenant_id}", with: "33333333-3333-3333-3333-333333333333")
        if operation.template == "/v1/sign-ins/{sign_in_id}" {
            // A sign-in another key (the admin key) started: readable with `accounts:read` only.
            let started = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"]])
            path = "/v1/sign-ins/" + (started.json["sign_in_id"] as? String ?? "si_absent")
        }
        var headers: [String: String] = [:]
        if let authorization { headers["Authorization"] = authorization }
        var body: Any?
        switch operation.template {
        case "/v1/sign-ins": body = ["scopes": ["User.Read"]]
        case "/v1/tokens/silent": body = ["account_id": accountId, "scopes": ["User.Read"]]
        case "/v1/tokens/app": body = ["scopes": ["https://graph.microsoft.com/.default"]]
        case "/v1/accounts/import":
            body = ["username": "imported@contoso.example", "refresh_token": "adal-era-test-token", "authority": "\(stack.emulator.baseURL)/\(stack.tenantId)"]
        case "/v1/tokens/on-behalf-of":
            // The account's token for TokenRelay's own app: what a caller's API would pass on.
            let incoming = try await stack.request(
                "POST", "/v1/tokens/silent", json: ["account_id": accountId, "scopes": ["api://\(InProcessApp.clientId)/access_as_user"]])
            body = ["assertion": incoming.json["access_token"] as? String ?? "", "scopes": ["User.Read"]]
        case "/v1/downstream/{api}/{path}", "/v1/downstream-encoded/{api}/{path}": headers["X-Account-Id"] = accountId
        default: break
        }
        return try await stack.request(operation.method, path, json: body, headers: headers, authenticated: false)
    }

    /// Signs `username` in through `authority` (the default one when nil); returns its account id.
    static func signIn(_ stack: InProcessApp, _ username: String, tenant: String) async throws -> String {
        let started = try await stack.request(
            "POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": username, "authority": "\(stack.emulator.baseURL)/\(tenant)"])
        guard started.status == 201, let authorize = started.json["authorize_url"] as? String else {
            throw TestFailure("sign-in start answered \(started.status): \(started.text)")
        }
        let redirect = try await stack.http.execute(.init(method: "GET", url: authorize))
        guard let location = redirect.headers["Location"] else { throw TestFailure("authorize answered \(redirect.status)") }
        let callback = try await stack.request("GET", location, authenticated: false)
        guard let id = (callback.json["account"] as? [String: Any])?["account_id"] as? String else {
            throw TestFailure("callback answered \(callback.status): \(callback.text)")
        }
        return id
    }

    static func bearer(_ key: String) -> [String: String] { ["Authorization": "Bearer \(key)"] }

    // MARK: Tests

    @Test("The table names every operation of openapi.yaml")
    func allRoutesCovered() throws {
        let text = try String(contentsOfFile: BuiltProducts.packageRoot() + "/openapi.yaml", encoding: .utf8)
        var documented = Set<String>()
        var inPaths = false
        var path: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if !line.hasPrefix(" ") && !line.isEmpty { inPaths = line.hasPrefix("paths:") }
            guard inPaths else { continue }
            if line.hasPrefix("  /") && line.hasSuffix(":") {
                path = String(line.dropFirst(2).dropLast())
            } else if line.hasPrefix("    "), !line.hasPrefix("     "), line.hasSuffix(":"), let path {
                let method = line.trimmingCharacters(in: .whitespaces).dropLast()
                if ["get", "post", "put", "patch", "delete"].contains(String(method)) { documented.insert("\(method.uppercased()) \(path)") }
            }
        }
        #expect(!documented.isEmpty)
        #expect(documented == Set(Self.operations.map(\.description)))
    }

    @Test("Every route: a missing, malformed or revoked key is 401 with WWW-Authenticate; a key without the permission is 403")
    func everyRouteRefusesBadKeys() async throws {
        let stack = try await InProcessApp(name: "inproc_keys_routes")
        defer { stack.stop() }
        let accountId = try await stack.signInAccountId()
        let revoked = try await Self.createKey(stack, permissions: Self.allPermissions)
        #expect(try await stack.revokeKey(revoked.keyId))
        let revokedSecretForm = revoked.key
        let malformed = [
            "Bearer", "Basic dXNlcjpwYXNz", "Bearer not-a-key", "Bearer trk_SHORT_secret", "Bearer trk_abc_secret", "Bearer trk_abcdefgh_",
            "Bearer trk_\(revoked.keyId)_wrong-secret", "Bearer \(stack.apiKey)x",
        ]
        for operation in Self.operations {
            if operation.permission == nil {
                let open = try await Self.call(stack, operation, authorization: nil, accountId: accountId)
                #expect(open.status != 401 && open.status != 403, "\(operation) needs no key: \(open.status)")
                continue
            }
            var cases: [(String, String?)] = [("missing", nil), ("revoked", "Bearer \(revokedSecretForm)")]
            cases += malformed.map { ("malformed '\($0.prefix(24))'", $0) }
            for (label, authorization) in cases {
                let refused = try await Self.call(stack, operation, authorization: authorization, accountId: accountId)
                #expect(refused.status == 401, "\(operation) \(label): \(refused.status) \(refused.text)")
                #expect(refused.json["error"] as? String == "unauthenticated", "\(operation) \(label)")
                #expect(refused.headers["WWW-Authenticate"] == #"Bearer realm="tokenrelay""#, "\(operation) \(label)")
                #expect(refused.headers["Content-Type"] == "application/problem+json")
            }
            let others = Self.allPermissions.filter { $0 != operation.permission && $0 != operation.alternative && $0 != "admin" }
            let underPrivileged = try await Self.createKey(stack, permissions: others)
            let forbidden = try await Self.call(stack, operation, authorization: "Bearer \(underPrivileged.key)", accountId: accountId)
            #expect(forbidden.status == 403, "\(operation) without \(operation.permission!): \(forbidden.status) \(forbidden.text)")
            #expect(forbidden.json["error"] as? String == "forbidden")
            let privileged = try await Self.createKey(stack, permissions: [operation.permission!])
            let allowed = try await Self.call(stack, operation, authorization: "Bearer \(privileged.key)", accountId: accountId)
            if operation.template.hasPrefix("/v1/downstream") {
                // The API's own answer to the method (e.g. 405 for PUT /me) is relayed: TokenRelay let the call through.
                #expect(allowed.headers["TokenRelay-Relayed"] == "true", "\(operation) with \(operation.permission!): \(allowed.status) \(allowed.text)")
            } else {
                #expect(allowed.status < 400, "\(operation) with \(operation.permission!): \(allowed.status) \(allowed.text)")
            }
        }
    }

    @Test("A key limited to one tenant cannot see or use another tenant's accounts (list, get, delete, silent, downstream)")
    func tenantLimits() async throws {
        let stack = try await InProcessApp(name: "inproc_keys_tenants")
        defer { stack.stop() }
        let alice = try await stack.signInAccountId()
        let carol = try await Self.signIn(stack, "carol@fabrikam.example", tenant: Self.otherTenant)
        // Carol's token is in this replica's memory: the server-thread path must refuse it too.
        let warm = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": carol, "scopes": ["User.Read"]])
        #expect(warm.json["source"] as? String == "cache")
        let limited = try await Self.createKey(
            stack, permissions: ["tokens:acquire", "accounts:read", "accounts:write", "downstream:call"], tenants: [stack.tenantId.uppercased()])
        let headers = Self.bearer(limited.key)

        let list = try await stack.request("GET", "/v1/accounts", headers: headers, authenticated: false)
        #expect(list.status == 200)
        #expect((list.json["accounts"] as? [[String: Any]])?.compactMap { $0["account_id"] as? String } == [alice])
        let foreignFilter = try await stack.request("GET", "/v1/accounts?tenant_id=\(Self.otherTenant)", headers: headers, authenticated: false)
        #expect(foreignFilter.status == 403)
        #expect(foreignFilter.json["error"] as? String == "forbidden")
        #expect(try await stack.request("GET", "/v1/accounts/\(alice)", headers: headers, authenticated: false).status == 200)
        let hidden = try await stack.request("GET", "/v1/accounts/\(carol)", headers: headers, authenticated: false)
        #expect(hidden.status == 404)
        #expect(hidden.json["error"] as? String == "account_not_found")

        for _ in 0..<2 {
            let silent = try await stack.request(
                "POST", "/v1/tokens/silent", json: ["account_id": carol, "scopes": ["User.Read"]], headers: headers, authenticated: false)
            #expect(silent.status == 404, "\(silent.text)")
            // Refused from memory (the first) and after the database (the second) alike, naming the member.
            #expect(silent.json["field"] as? String == "account_id")
        }
        #expect(
            try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": alice, "scopes": ["User.Read"]], headers: headers, authenticated: false)
                .status == 200)
        let byUsername = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["username": "carol@fabrikam.example", "scopes": ["User.Read"]], headers: headers, authenticated: false)
        #expect(byUsername.status == 404)
        #expect(byUsername.json["field"] as? String == "username")
        let byHome = try await stack.request(
            "POST", "/v1/tokens/silent",
            json: ["home_account_id": "00000000-0000-0000-0000-000000000001.\(Self.otherTenant)", "scopes": ["User.Read"]], headers: headers,
            authenticated: false)
        #expect(byHome.status == 404, "\(byHome.text)")
        #expect(byHome.json["field"] as? String == "home_account_id")
        let namedTenant = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["username": "carol@fabrikam.example", "tenant_id": Self.otherTenant, "scopes": ["User.Read"]],
            headers: headers, authenticated: false)
        #expect(namedTenant.status == 403)
        let foreignAuthority = try await stack.request(
            "POST", "/v1/tokens/silent",
            json: ["account_id": alice, "scopes": ["User.Read"], "authority": "\(stack.emulator.baseURL)/\(Self.otherTenant)"], headers: headers,
            authenticated: false)
        #expect(foreignAuthority.status == 403)
        let foreignSignIn = try await stack.request(
            "POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "authority": "\(stack.emulator.baseURL)/\(Self.otherTenant)"], headers: headers,
            authenticated: false)
        #expect(foreignSignIn.status == 403)
        // Naming no authority means the default one (contoso's here): a key limited to fabrikam may
        // not start it. It used to get 201, and the sign-in replaced alice's refresh token.
        let fabrikamKey = try await Self.createKey(stack, permissions: ["accounts:write"], tenants: [Self.otherTenant])
        let defaultSignIn = try await stack.request(
            "POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": "alice@contoso.example"], headers: Self.bearer(fabrikamKey.key),
            authenticated: false)
        #expect(defaultSignIn.status == 403, "\(defaultSignIn.text)")
        #expect(defaultSignIn.json["field"] as? String == "authority", "\(defaultSignIn.text)")
        let ownSignIn = try await stack.request(
            "POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "authority": "\(stack.emulator.baseURL)/\(Self.otherTenant)"],
            headers: Self.bearer(fabrikamKey.key), authenticated: false)
        #expect(ownSignIn.status == 201, "\(ownSignIn.text)")

        let graphBefore = try await stack.emulatorCount("graph_requests")
        let downstream = try await stack.request(
            "GET", "/v1/downstream/graph/me", headers: headers.merging(["X-Account-Id": carol]) { $1 }, authenticated: false)
        #expect(downstream.status == 404, "\(downstream.text)")
        #expect(try await stack.emulatorCount("graph_requests") == graphBefore)
        let ownDownstream = try await stack.request(
            "GET", "/v1/downstream/graph/me", headers: headers.merging(["X-Account-Id": alice]) { $1 }, authenticated: false)
        #expect(ownDownstream.status == 200)

        let delete = try await stack.request("DELETE", "/v1/accounts/\(carol)", headers: headers, authenticated: false)
        #expect(delete.status == 204)
        #expect(try await stack.request("GET", "/v1/accounts/\(carol)").status == 200, "the invisible account was deleted")

        // Events: the limited key reads only its tenant's account events.
        #expect(try await stack.request("DELETE", "/v1/accounts/\(carol)").status == 204)
        #expect(try await stack.request("DELETE", "/v1/accounts/\(alice)", headers: headers, authenticated: false).status == 204)
        func eventAccounts(_ response: TestResponse) -> [String] {
            (response.json["events"] as? [[String: Any]] ?? []).compactMap { $0["account_id"] as? String }
        }
        let everyEvent = try await stack.request("GET", "/v1/events")
        #expect(Set(eventAccounts(everyEvent)) == [alice, carol])
        let ownEvents = try await stack.request("GET", "/v1/events", headers: headers, authenticated: false)
        #expect(ownEvents.status == 200)
        #expect(Set(eventAccounts(ownEvents)) == [alice], "a tenant-limited key read another tenant's events")
    }

    @Test(
        "A scope-limited key is never served a token carrying scopes outside its patterns: a wider cached one (server thread, suspended step, downstream) or a wider grant"
    )
    func scopeLimitsApplyToTheTokenServed() async throws {
        let stack = try await InProcessApp(name: "inproc_keys_token_scopes")
        defer { stack.stop() }
        let alice = try await stack.signInAccountId()
        let limited = try await Self.createKey(stack, permissions: ["tokens:acquire", "downstream:call"], scopes: ["User.Read"])
        let headers = Self.bearer(limited.key)
        func widen() async throws {
            // Another caller's request leaves a token for both scopes in the shared cache.
            let wide = try await stack.request(
                "POST", "/v1/tokens/silent", json: ["account_id": alice, "scopes": ["User.Read", "Mail.Send"], "force_refresh": true])
            #expect(wide.status == 200, "\(wide.text)")
            #expect(Set(wide.json["scopes"] as? [String] ?? []) == ["Mail.Send", "User.Read"], "\(wide.text)")
        }
        try await widen()
        // It used to answer 200 source cache with Mail.Send in scopes and in the token's scp.
        let redeemed = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": alice, "scopes": ["User.Read"]], headers: headers, authenticated: false)
        #expect(redeemed.status == 200, "\(redeemed.text)")
        #expect(redeemed.json["scopes"] as? [String] == ["User.Read"], "\(redeemed.text)")
        #expect(redeemed.json["source"] as? String == "refresh", "\(redeemed.text)")
        let payload = try #require((redeemed.json["access_token"] as? String)?.split(separator: ".").dropFirst().first)
        var base64 = payload.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        let decoded = try #require(Data(base64Encoded: base64))
        let claims = try #require(try JSONSerialization.jsonObject(with: decoded) as? [String: Any])
        #expect(!(claims["scp"] as? String ?? "").contains("Mail.Send"), "\(claims)")
        // Its own token is then served from the cache.
        let cached = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": alice, "scopes": ["User.Read"]], headers: headers, authenticated: false)
        #expect(cached.json["source"] as? String == "cache", "\(cached.text)")
        #expect(cached.json["scopes"] as? [String] == ["User.Read"], "\(cached.text)")

        // Downstream calls acquire through the same rule: a wider cached token is not used for them.
        try await widen()
        let before = try await stack.emulatorCount()
        let me = try await stack.request("GET", "/v1/downstream/graph/me", headers: headers.merging(["X-Account-Id": alice]) { $1 }, authenticated: false)
        #expect(me.status == 200, "\(me.text)")
        #expect(try await stack.emulatorCount() == before + 1, "the downstream call used the wider cached token")
        // The unlimited key is unaffected: the wide request is served from its cache.
        let widened = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": alice, "scopes": ["User.Read", "Mail.Send"]])
        #expect(widened.status == 200, "\(widened.text)")

        // The platform grants Mail.Send (consented earlier) with every Graph request: the key is
        // refused the token it cannot have, and the rotated refresh token is kept.
        _ = try await stack.control("POST", "/_control/users/alice@contoso.example", json: ["consented_scopes": ["Mail.Send"]])
        let granted = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": alice, "scopes": ["User.Read"], "force_refresh": true], headers: headers,
            authenticated: false)
        #expect(granted.status == 403, "\(granted.text)")
        #expect(granted.json["field"] as? String == "scopes", "\(granted.text)")
        #expect(granted.json["scopes"] as? [String] == ["Mail.Send"], "\(granted.text)")
        #expect(!granted.text.contains("access_token"), "\(granted.text)")
        let admin = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": alice, "scopes": ["User.Read"]])
        #expect(admin.status == 200, "\(admin.text)")
        #expect(admin.json["source"] as? String == "cache", "the token the key was refused was not kept: \(admin.text)")
    }

    @Test("App tokens honour the key's tenant and scope limits, also when the body names a correlation_id")
    func appTokenLimits() async throws {
        let stack = try await InProcessApp(name: "inproc_keys_app")
        defer { stack.stop() }
        let limited = try await Self.createKey(stack, permissions: ["tokens:acquire"], tenants: [stack.tenantId], scopes: ["https://graph.microsoft.com/*"])
        func app(_ body: [String: Any]) async throws -> TestResponse {
            try await stack.request("POST", "/v1/tokens/app", json: body, headers: Self.bearer(limited.key), authenticated: false)
        }
        let graph: [String: Any] = ["scopes": ["https://graph.microsoft.com/.default"]]
        #expect(try await app(graph).status == 200)
        let correlation: [String: Any] = ["correlation_id": "4b1c3a55-0d4e-4f0e-9a55-2f4f1f7a0c11"]
        for extra in [[:], correlation] {
            let foreignTenant = try await app(graph.merging(["tenant_id": Self.otherTenant]) { $1 }.merging(extra) { $1 })
            #expect(foreignTenant.status == 403, "\(extra): \(foreignTenant.text)")
            let vault: [String: Any] = ["scopes": ["https://vault.azure.net/.default"]]
            let foreignScope = try await app(vault.merging(extra) { $1 })
            #expect(foreignScope.status == 403, "\(extra): \(foreignScope.text)")
        }
    }

    @Test("On the downstream relay a key's limits and an unknown account name what the call sent: the API or the identity header, never a body member")
    func downstreamProblemsNameTheCallsInput() async throws {
        let stack = try await InProcessApp(name: "inproc_keys_downstream_fields")
        defer { stack.stop() }
        let alice = try await stack.signInAccountId()
        let otherTenant = try await Self.createKey(stack, permissions: ["downstream:call"], tenants: [Self.otherTenant])
        let mailOnly = try await Self.createKey(stack, permissions: ["downstream:call"], scopes: ["Mail.*"])
        let full = try await Self.createKey(stack, permissions: ["downstream:call"])
        // An assertion of the default tenant (its shape only is read before the tenant check).
        let payload = Data(#"{"exp":4102444800,"tid":"\#(stack.tenantId)"}"#.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        let assertion = "eyJhbGciOiJSUzI1NiJ9.\(payload).c2ln"
        let cases: [(key: String, identity: [String: String], status: Int, field: String)] = [
            (otherTenant.key, ["X-App-Only": "true"], 403, "X-App-Only"),
            (otherTenant.key, ["X-On-Behalf-Of-Assertion": assertion], 403, "X-On-Behalf-Of-Assertion"),
            (mailOnly.key, ["X-Account-Id": alice], 403, "api"),
            (mailOnly.key, ["X-App-Only": "true"], 403, "api"),
            (full.key, ["X-Account-Id": "acc_unknown"], 404, "X-Account-Id"),
        ]
        for (key, identity, status, field) in cases {
            let answer = try await stack.request(
                "GET", "/v1/downstream/graph/me", headers: Self.bearer(key).merging(identity) { $1 }, authenticated: false)
            #expect(answer.status == status, "\(identity.keys): \(answer.text)")
            #expect(answer.json["field"] as? String == field, "\(identity.keys): \(answer.text)")
        }
    }

    @Test("A key limited by scope patterns gets 403 for other scopes (silent, sign-in, downstream)")
    func scopePatterns() async throws {
        let stack = try await InProcessApp(name: "inproc_keys_scopes")
        defer { stack.stop() }
        let alice = try await stack.signInAccountId()
        let userOnly = try await Self.createKey(stack, permissions: ["tokens:acquire", "accounts:write", "downstream:call"], scopes: ["user.*"])
        let mailOnly = try await Self.createKey(stack, permissions: ["tokens:acquire", "downstream:call"], scopes: ["Mail.*", "https://vault.azure.net/*"])
        func silent(_ key: String, _ scopes: [String]) async throws -> TestResponse {
            try await stack.request(
                "POST", "/v1/tokens/silent", json: ["account_id": alice, "scopes": scopes], headers: Self.bearer(key), authenticated: false)
        }
        #expect(try await silent(userOnly.key, ["User.Read"]).status == 200)
        #expect(try await silent(userOnly.key, ["https://graph.microsoft.com/User.Read"]).status == 200)
        let mail = try await silent(userOnly.key, ["Mail.Read"])
        #expect(mail.status == 403)
        #expect(mail.json["error"] as? String == "forbidden")
        #expect(mail.json["field"] as? String == "scopes")
        #expect(try await silent(userOnly.key, ["https://vault.azure.net/user_impersonation"]).status == 403)
        // A line break inside an element is a separator the limit sees: "\r\n" is one Swift
        // Character, and split by Character it once stayed inside "User.Read\r\nMail.Read" (200,
        // a token for Mail.Read too). Other separators, and bytes no scope may hold, likewise.
        for smuggled in ["User.Read\r\nMail.Read", "User.Read\nMail.Read", "User.Read\tMail.Read"] {
            let answer = try await silent(userOnly.key, [smuggled])
            #expect(answer.status == 403, "\(smuggled.debugDescription): \(answer.text)")
            #expect(answer.json["field"] as? String == "scopes")
            let signIn = try await stack.request(
                "POST", "/v1/sign-ins", json: ["scopes": [smuggled]], headers: Self.bearer(userOnly.key), authenticated: false)
            #expect(signIn.status == 403, "\(smuggled.debugDescription): \(signIn.text)")
        }
        for malformed in ["User.Read\u{1}", "User.Read\u{85}", "Us\"er.Read", "User.Réad"] {
            let answer = try await silent(userOnly.key, [malformed])
            #expect(answer.status == 400, "\(malformed.debugDescription): \(answer.text)")
            #expect(answer.json["field"] as? String == "scopes")
        }
        // User.Read is cached in memory now: the server-thread path refuses it to the other key.
        // The first use of a key looks it up in the database; the second is answered from memory.
        for _ in 0..<2 {
            let cachedButForbidden = try await silent(mailOnly.key, ["User.Read"])
            #expect(cachedButForbidden.status == 403, "\(cachedButForbidden.text)")
        }

        let signIn = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["Mail.Read"]], headers: Self.bearer(userOnly.key), authenticated: false)
        #expect(signIn.status == 403)
        #expect(
            try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"]], headers: Self.bearer(userOnly.key), authenticated: false)
                .status == 201)
        // The graph downstream API is configured with User.Read.
        func downstream(_ key: String) async throws -> TestResponse {
            try await stack.request("GET", "/v1/downstream/graph/me", headers: ["Authorization": "Bearer \(key)", "X-Account-Id": alice], authenticated: false)
        }
        #expect(try await downstream(userOnly.key).status == 200)
        let refused = try await downstream(mailOnly.key)
        #expect(refused.status == 403, "\(refused.text)")
        #expect(refused.json["error"] as? String == "forbidden")

        // What `api-keys list` prints from: the patterns as given, the secret nowhere.
        let listed = try await stack.apiKeys()
        #expect(listed.first { $0.keyId == mailOnly.keyId }?.scopePatterns == ["Mail.*", "https://vault.azure.net/*"])
        #expect(!String(describing: listed).contains(mailOnly.key))
    }

    @Test("Past TOKENRELAY_RATE_LIMIT_PER_KEY a key gets 429 rate_limited with Retry-After; other keys are not affected")
    func rateLimit() async throws {
        let stack = try await InProcessApp(name: "inproc_keys_rate") { $0.limits.rateLimitPerKey = 2 }
        defer { stack.stop() }
        let alice = try await stack.signInAccountId()
        let key = try await Self.createKey(stack, permissions: ["tokens:acquire", "accounts:read"])
        var statuses: [Int] = []
        var limited: TestResponse?
        // Cached silent requests (answered on the server thread) and a database route share the budget.
        for index in 0..<10 {
            let response =
                index % 2 == 0
                ? try await stack.request(
                    "POST", "/v1/tokens/silent", json: ["account_id": alice, "scopes": ["User.Read"]], headers: Self.bearer(key.key), authenticated: false)
                : try await stack.request("GET", "/v1/accounts", headers: Self.bearer(key.key), authenticated: false)
            statuses.append(response.status)
            if response.status == 429 { limited = response }
        }
        #expect(statuses.filter { $0 == 200 }.count >= 2, "\(statuses)")
        #expect(statuses.filter { $0 == 200 }.count <= 3, "\(statuses)")
        let problem = try #require(limited, "\(statuses)")
        #expect(problem.json["error"] as? String == "rate_limited")
        #expect(problem.headers["Content-Type"] == "application/problem+json")
        let retryAfter = try #require(problem.headers["Retry-After"].flatMap { Int($0) })
        #expect(retryAfter >= 1)
        #expect(problem.json["retry_after_s"] as? Int == retryAfter)
        let other = try await Self.createKey(stack, permissions: ["accounts:read"])
        #expect(try await stack.request("GET", "/v1/accounts", headers: Self.bearer(other.key), authenticated: false).status == 200)
    }
}
