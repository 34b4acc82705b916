import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// `POST /v1/tokens/app`, `POST /v1/tokens/on-behalf-of`, the certificate and federated client
/// credentials, and downstream calls with each identity header, on the real binaries.
@Suite("App and on-behalf-of tokens, end to end", .serialized)
struct AppAndOnBehalfOfTests {
    static let graphDefault = "https://graph.microsoft.com/.default"

    /// `token_requests_by_grant[grant]` of the emulator (0 when absent).
    static func grantCount(_ stack: TokenRelayStack, _ grant: String) async throws -> Int {
        let stats = try await stack.control("GET", "/_control/stats").json
        return (stats["token_requests_by_grant"] as? [String: Any])?[grant] as? Int ?? 0
    }

    /// The claims of a JWT (no signature check).
    static func claims(_ token: String) -> [String: Any] {
        let parts = token.split(separator: ".")
        guard parts.count == 3 else { return [:] }
        var text = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        text += String(repeating: "=", count: (4 - text.count % 4) % 4)
        guard let data = Data(base64Encoded: text) else { return [:] }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    }

    /// A user access token whose audience is TokenRelay's own app: what a caller's API receives
    /// and passes on as the OBO assertion.
    static func incomingUserToken(_ stack: TokenRelayStack, force: Bool = false) async throws -> String {
        let scope = "api://\(TokenRelayStack.clientId)/access_as_user"
        let accountId: String
        if let account = try await stack.signIn("alice@contoso.example", scopes: [scope])["account"] as? [String: Any],
            let id = account["account_id"] as? String
        {
            accountId = id
        } else {
            throw TestFailure("no account")
        }
        let token = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": accountId, "scopes": [scope], "force_refresh": force])
        guard token.status == 200, let value = token.json["access_token"] as? String else { throw TestFailure("silent answered \(token.status)") }
        return value
    }

    /// The silent answer had no `Cache-Control` (found by the new-user try); an answer holding an
    /// access token must not be stored by a cache on the way (RFC 6749 §5.1).
    @Test("Every token answer (silent from the STS and from cache, app from the STS and from cache) says Cache-Control: no-store")
    func tokenAnswersAreNotCached() async throws {
        let stack = try await TokenRelayStack(name: "e2e_token_no_store")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        for force in [true, false] {
            let silent = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": force])
            let cacheControl = silent.headers["Cache-Control"] ?? "none"
            #expect(silent.status == 200 && cacheControl == "no-store", "force_refresh \(force): \(cacheControl)")
        }
        for _ in 0..<2 {
            let app = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault]])
            #expect(app.status == 200 && app.headers["Cache-Control"] == "no-store", "\(app.json["source"] ?? "")")
        }
    }

    @Test("App token with the client secret: one STS call, then the cache; stored encrypted under owner app:{tenant}")
    func appTokenWithSecret() async throws {
        let stack = try await TokenRelayStack(name: "e2e_app_secret")
        defer { stack.stop() }
        let first = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault]])
        #expect(first.status == 200, "\(first.text)")
        #expect(first.json["source"] as? String == "identity_provider")
        #expect(first.json["token_type"] as? String == "Bearer")
        #expect(first.json["scopes"] as? [String] == [Self.graphDefault])
        let token = try #require(first.json["access_token"] as? String)
        #expect(Self.claims(token)["idtyp"] as? String == "app")
        #expect(Self.claims(token)["tid"] as? String == stack.tenantId)

        let second = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault], "tenant_id": stack.tenantId])
        #expect(second.status == 200)
        #expect(second.json["source"] as? String == "cache")
        #expect(second.json["access_token"] as? String == token)
        #expect(try await Self.grantCount(stack, "client_credentials") == 1)

        let rows = try await stack.withDatabase { connection in
            try connection.query("SELECT owner, ciphertext FROM grant_access_tokens", []).rows.map { ($0.string("owner") ?? "", $0.bytes("ciphertext") ?? []) }
        }
        #expect(rows.map(\.0) == ["app:\(stack.tenantId)"])
        #expect(rows.allSatisfy { !String(decoding: $0.1, as: UTF8.self).contains(token) })

        for bad in [["User.Read"], [Self.graphDefault, "https://management.azure.com/.default"]] {
            let refused = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": bad])
            #expect(refused.status == 400)
            #expect(refused.json["error"] as? String == "invalid_scope")
        }
        // Named by the member that chose `common`: the request had no `tenant_id` (it was named).
        let common = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault], "authority": "\(stack.emulator.baseURL)/common"])
        #expect(common.status == 400)
        #expect(common.json["field"] as? String == "authority", "\(common.text)")
        let commonTenant = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault], "tenant_id": "organizations"])
        #expect(commonTenant.status == 400 && commonTenant.json["field"] as? String == "tenant_id", "\(commonTenant.text)")
        // Neither a tenant id nor a domain: refused before the STS, as every `tenant_id` is (it went
        // to the STS and came back as AADSTS90002).
        for notATenant in ["contoso_com", "t1", "-contoso.example"] {
            let refused = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault], "tenant_id": notATenant])
            #expect(refused.status == 400 && refused.json["field"] as? String == "tenant_id", "\(notATenant): \(refused.text)")
        }
        #expect(try await Self.grantCount(stack, "client_credentials") == 1)
    }

    @Test("API-key limits apply to app and on-behalf-of tokens: a foreign tenant or scope is 403")
    func keyLimits() async throws {
        let stack = try await TokenRelayStack(name: "e2e_app_key_limits")
        defer { stack.stop() }
        let other = StackHelpers.otherTenant
        let tenantLimited = try await StackHelpers.createKey(stack, permissions: ["tokens:acquire"], tenants: [other])
        let scopeLimited = try await StackHelpers.createKey(stack, permissions: ["tokens:acquire"], scopes: ["https://graph.microsoft.com/*"])
        func app(_ key: String, _ body: [String: Any]) async throws -> TestResponse {
            try await stack.request("POST", "/v1/tokens/app", json: body, headers: StackHelpers.bearer(key), authenticated: false)
        }
        // No tenant or authority named: `authority`, the member that would choose another (behaviour §4.3), as sign-ins name it.
        let defaultTenant = try await app(tenantLimited.key, ["scopes": [Self.graphDefault]])
        #expect(defaultTenant.status == 403, "\(defaultTenant.text)")
        #expect(defaultTenant.json["field"] as? String == "authority", "\(defaultTenant.text)")
        let foreignTenant = try await app(tenantLimited.key, ["scopes": [Self.graphDefault], "tenant_id": stack.tenantId])
        #expect(foreignTenant.status == 403 && foreignTenant.json["field"] as? String == "tenant_id", "\(foreignTenant.text)")
        #expect(try await app(tenantLimited.key, ["scopes": [Self.graphDefault], "tenant_id": other]).status == 200)
        #expect(try await app(scopeLimited.key, ["scopes": [Self.graphDefault]]).status == 200)
        let management = try await app(scopeLimited.key, ["scopes": ["https://management.azure.com/.default"]])
        #expect(management.status == 403)
        #expect(management.json["field"] as? String == "scopes")
        let assertion = try await Self.incomingUserToken(stack)
        let obo = try await stack.request(
            "POST", "/v1/tokens/on-behalf-of", json: ["assertion": assertion, "scopes": ["https://management.azure.com/user_impersonation"]],
            headers: StackHelpers.bearer(scopeLimited.key), authenticated: false)
        #expect(obo.status == 403)
    }

    @Test("Certificate credential: sign-in, silent refresh and app token authenticate with a signed client assertion", arguments: ["PS256", "RS256"])
    func certificateCredential(algorithm: String) async throws {
        let certificate = try await TestCertificate.make()
        defer { certificate.remove() }
        let stack = try await TokenRelayStack(
            name: "e2e_app_cert_\(algorithm.lowercased())",
            environment: [
                "TOKENRELAY_CLIENT_SECRET": "", "TOKENRELAY_CLIENT_CERTIFICATE": certificate.combinedPath,
                "TOKENRELAY_CLIENT_ASSERTION_ALGORITHM": algorithm,
            ],
            emulatorArguments: ["--client-certificate", certificate.certificatePath])
        defer { stack.stop() }
        let accountId = try await stack.signInAccountId()
        let refreshed = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": accountId, "scopes": ["User.Read"], "force_refresh": true])
        #expect(refreshed.status == 200, "\(refreshed.text)")

        let first = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault]])
        #expect(first.status == 200, "\(first.text)")
        #expect(first.json["source"] as? String == "identity_provider")
        let second = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault]])
        #expect(second.json["source"] as? String == "cache")
        #expect(try await Self.grantCount(stack, "client_credentials") == 1)
        let log = stack.relay.log()
        #expect(!log.contains("client_assertion="))
        // The test certificate is valid for 2 days: readiness warns (behaviour §12 Health: < 14 days).
        let ready = try await stack.request("GET", "/readyz", authenticated: false)
        #expect(ready.status == 200)
        #expect(ready.json["status"] as? String == "warn")
        let check = ((ready.json["checks"] as? [String: Any])?["client:credential"] as? [[String: Any]])?.first { $0["componentId"] as? String == "expiry" }
        #expect(check?["status"] as? String == "warn")
        #expect((check?["output"] as? String)?.contains("client certificate") == true)
    }

    @Test("A certificate the identity provider does not know is 502 upstream_error with AADSTS700027")
    func unknownCertificate() async throws {
        let used = try await TestCertificate.make()
        let registered = try await TestCertificate.make()
        defer {
            used.remove()
            registered.remove()
        }
        let stack = try await TokenRelayStack(
            name: "e2e_app_badcert", environment: ["TOKENRELAY_CLIENT_SECRET": "", "TOKENRELAY_CLIENT_CERTIFICATE": used.combinedPath],
            emulatorArguments: ["--client-certificate", registered.certificatePath])
        defer { stack.stop() }
        let refused = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault]])
        #expect(refused.status == 502, "\(refused.text)")
        #expect(refused.json["error"] as? String == "upstream_error")
        #expect(refused.json["sts_error_codes"] as? [Int] == [700027])
    }

    @Test("A federated assertion file is read for every request: a rotated file is used at once")
    func assertionFile() async throws {
        let certificate = try await TestCertificate.make()
        defer { certificate.remove() }
        let path = certificate.directory + "/federated-token"
        try "placeholder".write(toFile: path, atomically: true, encoding: .utf8)
        let stack = try await TokenRelayStack(
            name: "e2e_app_assertion_file", environment: ["TOKENRELAY_CLIENT_SECRET": "", "TOKENRELAY_CLIENT_ASSERTION_FILE": path],
            emulatorArguments: ["--client-certificate", certificate.certificatePath])
        defer { stack.stop() }
        let audience = "\(stack.emulator.baseURL)/\(stack.tenantId)/oauth2/v2.0/token"
        try certificate.clientAssertion(clientId: TokenRelayStack.clientId, audience: audience).write(toFile: path, atomically: true, encoding: .utf8)
        let first = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault]])
        #expect(first.status == 200, "\(first.text)")

        // The emulator refuses a replayed jti: the same file content fails for a new resource...
        let otherResource = ["scopes": ["api://\(TokenRelayStack.clientId)/.default"]]
        let replayed = try await stack.request("POST", "/v1/tokens/app", json: otherResource)
        #expect(replayed.status == 502, "\(replayed.text)")
        // ...and the rotated file is picked up without a restart.
        try certificate.clientAssertion(clientId: TokenRelayStack.clientId, audience: audience).write(toFile: path, atomically: true, encoding: .utf8)
        let rotated = try await stack.request("POST", "/v1/tokens/app", json: otherResource)
        #expect(rotated.status == 200, "\(rotated.text)")
    }

    @Test("On-behalf-of: cached by the assertion (same → one STS call, another → another); other scopes use the OBO refresh token")
    func onBehalfOf() async throws {
        let stack = try await TokenRelayStack(name: "e2e_obo")
        defer { stack.stop() }
        let assertion = try await Self.incomingUserToken(stack)
        let first = try await stack.request("POST", "/v1/tokens/on-behalf-of", json: ["assertion": assertion, "scopes": ["User.Read"]])
        #expect(first.status == 200, "\(first.text)")
        #expect(first.json["source"] as? String == "identity_provider")
        let token = try #require(first.json["access_token"] as? String)
        #expect(Self.claims(token)["aud"] as? String == "00000003-0000-0000-c000-000000000000")
        #expect(Self.claims(token)["preferred_username"] as? String == "alice@contoso.example")
        let jwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"
        #expect(try await Self.grantCount(stack, jwtBearer) == 1)

        let again = try await stack.request("POST", "/v1/tokens/on-behalf-of", json: ["assertion": assertion, "scopes": ["user.read"]])
        #expect(again.json["source"] as? String == "cache")
        #expect(again.json["access_token"] as? String == token)
        #expect(try await Self.grantCount(stack, jwtBearer) == 1)

        // Other scopes for the same assertion: the stored OBO refresh token, not a new exchange.
        let refreshesBefore = try await Self.grantCount(stack, "refresh_token")
        let mail = try await stack.request("POST", "/v1/tokens/on-behalf-of", json: ["assertion": assertion, "scopes": ["Mail.Read"]])
        #expect(mail.status == 200, "\(mail.text)")
        #expect(try await Self.grantCount(stack, jwtBearer) == 1)
        #expect(try await Self.grantCount(stack, "refresh_token") == refreshesBefore + 1)

        let other = try await Self.incomingUserToken(stack, force: true)
        #expect(other != assertion)
        let second = try await stack.request("POST", "/v1/tokens/on-behalf-of", json: ["assertion": other, "scopes": ["User.Read"]])
        #expect(second.status == 200)
        #expect(second.json["source"] as? String == "identity_provider")
        #expect(try await Self.grantCount(stack, jwtBearer) == 2)

        let owners = try await stack.withDatabase { connection in
            try connection.query("SELECT DISTINCT owner FROM obo_refresh_tokens ORDER BY owner", []).rows.compactMap { $0.string("owner") }
        }
        #expect(owners.count == 2)
        #expect(owners.allSatisfy { $0.hasPrefix("obo:") && $0.count == 4 + 64 })
        #expect(!stack.relay.log().contains(assertion))
    }

    @Test("On-behalf-of: interaction_required carries the claims for the caller's client; an expired OBO token is renewed with the OBO refresh token")
    func onBehalfOfChallengeAndRefresh() async throws {
        let stack = try await TokenRelayStack(name: "e2e_obo_claims")
        defer { stack.stop() }
        let assertion = try await Self.incomingUserToken(stack)
        let challenge = #"{"access_token":{"acrs":{"essential":true,"value":"c1"}}}"#
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: ["endpoint": "token", "username": "alice@contoso.example", "error_codes": [50076], "claims_challenge": challenge])
        let refused = try await stack.request("POST", "/v1/tokens/on-behalf-of", json: ["assertion": assertion, "scopes": ["User.Read"]])
        #expect(refused.status == 409, "\(refused.text)")
        #expect(refused.json["error"] as? String == "interaction_required")
        #expect((refused.json["claims"] as? String)?.contains("acrs") == true)
        #expect(refused.json["sts_error_codes"] as? [Int] == [50076])
        #expect(refused.json["account_state"] == nil)

        // Tokens issued with expires_in 60 are expired on arrival (expiry skew 300 s).
        _ = try await stack.control("POST", "/_control/users/alice@contoso.example", json: ["expires_in": 60])
        let jwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"
        let exchangesBefore = try await Self.grantCount(stack, jwtBearer)
        let first = try await stack.request("POST", "/v1/tokens/on-behalf-of", json: ["assertion": assertion, "scopes": ["User.Read"]])
        #expect(first.status == 200, "\(first.text)")
        #expect(try await Self.grantCount(stack, jwtBearer) == exchangesBefore + 1)
        let refreshesBefore = try await Self.grantCount(stack, "refresh_token")
        let renewed = try await stack.request("POST", "/v1/tokens/on-behalf-of", json: ["assertion": assertion, "scopes": ["User.Read"]])
        #expect(renewed.status == 200, "\(renewed.text)")
        #expect(renewed.json["access_token"] as? String != first.json["access_token"] as? String)
        #expect(try await Self.grantCount(stack, jwtBearer) == exchangesBefore + 1)
        #expect(try await Self.grantCount(stack, "refresh_token") == refreshesBefore + 1)
    }

    @Test("On-behalf-of: a refused user assertion (AADSTS50013) is 400 on 'assertion'; a refused client (AADSTS50012) is 502 and warns readiness")
    func onBehalfOfRefusals() async throws {
        let stack = try await TokenRelayStack(name: "e2e_obo_refusals")
        defer { stack.stop() }
        let assertion = try await Self.incomingUserToken(stack)
        func refused(_ code: Int) async throws -> TestResponse {
            _ = try await stack.control(
                "POST", "/_control/faults", json: ["endpoint": "token", "status": 400, "error": "invalid_grant", "error_codes": [code]])
            return try await stack.request("POST", "/v1/tokens/on-behalf-of", json: ["assertion": assertion, "scopes": ["User.Read"]])
        }
        let userAssertion = try await refused(50013)
        #expect(userAssertion.status == 400, "\(userAssertion.text)")
        #expect(userAssertion.json["field"] as? String == "assertion")
        #expect(try await stack.request("GET", "/readyz", authenticated: false).json["status"] as? String == "pass")

        let client = try await refused(50012)
        #expect(client.status == 502, "\(client.text)")
        #expect(client.json["error"] as? String == "upstream_error")
        #expect(try await stack.request("GET", "/readyz", authenticated: false).json["status"] as? String == "warn")
    }

    @Test("An expired or malformed assertion is 400 on 'assertion' without any STS call")
    func expiredAssertion() async throws {
        let stack = try await TokenRelayStack(name: "e2e_obo_expired")
        defer { stack.stop() }
        func part(_ object: [String: Any]) throws -> String {
            try JSONSerialization.data(withJSONObject: object).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        let expired = try part(["alg": "RS256", "typ": "JWT"]) + "." + (try part(["exp": Int(Date().timeIntervalSince1970) - 60, "aud": "x"])) + ".c2ln"
        let before = try await stack.emulatorCount("token_requests")
        for assertion in [expired, "not-a-token", ""] {
            let refused = try await stack.request("POST", "/v1/tokens/on-behalf-of", json: ["assertion": assertion, "scopes": ["User.Read"]])
            #expect(refused.status == 400, "\(refused.text)")
            #expect(refused.json["error"] as? String == "invalid_request")
            #expect(refused.json["field"] as? String == "assertion")
        }
        let missing = try await stack.request("POST", "/v1/tokens/on-behalf-of", json: ["scopes": ["User.Read"]])
        #expect(missing.status == 400)
        #expect(try await stack.emulatorCount("token_requests") == before)
    }

    @Test("Downstream calls with X-Account-Id, X-App-Only and X-On-Behalf-Of-Assertion reach Graph with the right token")
    func downstreamIdentities() async throws {
        let stack = try await TokenRelayStack(name: "e2e_downstream_identities")
        defer { stack.stop() }
        let accountId = try await stack.signInAccountId()
        let asAccount = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": accountId])
        #expect(asAccount.status == 200, "\(asAccount.text)")
        #expect(asAccount.json["userPrincipalName"] as? String == "alice@contoso.example")

        // App-only: Graph's /users/{id} with the app's roles (/me needs a user).
        let asApp = try await stack.request("GET", "/v1/downstream/graph/users/bob@contoso.example", headers: ["X-App-Only": "true"])
        #expect(asApp.status == 200, "\(asApp.text)")
        #expect(asApp.json["userPrincipalName"] as? String == "bob@contoso.example")
        #expect(try await Self.grantCount(stack, "client_credentials") == 1)
        let meAsApp = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-App-Only": "true"])
        #expect(meAsApp.status == 400)
        #expect(meAsApp.headers["TokenRelay-Relayed"] == "true")

        let assertion = try await Self.incomingUserToken(stack)
        let onBehalf = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-On-Behalf-Of-Assertion": assertion])
        #expect(onBehalf.status == 200, "\(onBehalf.text)")
        #expect(onBehalf.json["userPrincipalName"] as? String == "alice@contoso.example")
        #expect(try await Self.grantCount(stack, "urn:ietf:params:oauth:grant-type:jwt-bearer") == 1)

        let graphBefore = try await stack.emulatorCount("graph_requests")
        for headers in [[:], ["X-App-Only": "true", "X-Account-Id": accountId], ["X-App-Only": "yes"], ["X-On-Behalf-Of-Assertion": "garbage"]] {
            let refused = try await stack.request("GET", "/v1/downstream/graph/me", headers: headers)
            #expect(refused.status == 400, "\(headers.keys.sorted()): \(refused.text)")
            #expect(refused.json["error"] as? String == "invalid_request")
            #expect(refused.headers["TokenRelay-Relayed"] == nil)
        }
        #expect(try await stack.emulatorCount("graph_requests") == graphBefore)
    }
}
