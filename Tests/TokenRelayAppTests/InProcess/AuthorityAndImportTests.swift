import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// Authorities (AAD, B2C), scope rules, lenient token-response parsing, guest accounts and ADAL
/// imports through the handler, in process, against the emulator (behaviour §1, §3, §5, §12 Accounts).
@Suite("Authorities, B2C, scopes, guests and imports, in process", .serialized)
struct AuthorityAndImportTests {
    static let b2cTenant = "contosob2c.onmicrosoft.com"
    static let fabrikam = "22222222-2222-2222-2222-222222222222"

    /// Signs `username` in through `authority` as a browser would; returns the account object.
    static func signIn(_ stack: InProcessApp, _ username: String, authority: String, scopes: [String]) async throws -> [String: Any] {
        let callback = try await stack.signInThroughBrowser(username, scopes: scopes, authority: authority)
        guard let account = callback["account"] as? [String: Any] else { throw TestFailure("the callback answered no account: \(callback)") }
        return account
    }

    static func silent(_ stack: InProcessApp, _ body: [String: Any]) async throws -> TestResponse {
        try await stack.request("POST", "/v1/tokens/silent", json: body)
    }

    @Test("08-aadb2c90080-b2c-expired-grant: B2C sign-in (tfp and plain paths), silent token, then an expired grant is interaction_required")
    func b2cEndToEnd() async throws {
        let stack = try await InProcessApp(name: "inproc_b2c")
        defer { stack.stop() }
        // The emulator serves B2C discovery and keys under both path forms.
        for prefix in ["/tfp/\(Self.b2cTenant)/B2C_1_susi", "/\(Self.b2cTenant)/B2C_1_susi"] {
            let discovery = try await stack.control("GET", prefix + "/v2.0/.well-known/openid-configuration")
            #expect(discovery.status == 200)
            #expect((discovery.json["token_endpoint"] as? String)?.hasSuffix("/B2C_1_susi/oauth2/v2.0/token") == true)
            #expect(try await stack.control("GET", prefix + "/discovery/v2.0/keys").status == 200)
        }

        let scope = "https://\(Self.b2cTenant)/api/read"
        let authority = "\(stack.emulator.baseURL)/tfp/\(Self.b2cTenant)/B2C_1_SUSI"
        let account = try await Self.signIn(stack, "dave@b2c.example", authority: authority, scopes: [scope])
        #expect(account["authority_type"] as? String == "b2c")
        #expect(account["username"] as? String == "dave@b2c.example")  // first of `emails`
        let oid = try #require(account["local_account_id"] as? String)
        #expect(account["home_account_id"] as? String == "\(oid)-b2c_1_susi.33333333-3333-3333-3333-333333333333")
        let claims = try #require(account["id_token_claims"] as? [String: Any])
        #expect(claims["emails"] as? [String] == ["dave@b2c.example"])
        #expect(claims["tfp"] as? String == "B2C_1_SUSI")
        #expect(claims["preferred_username"] == nil)
        let id = try #require(account["account_id"] as? String)

        let cached = try await Self.silent(stack, ["account_id": id, "scopes": [scope]])
        #expect(cached.status == 200, "\(cached.text)")
        #expect(cached.json["source"] as? String == "cache")
        let refreshed = try await Self.silent(stack, ["account_id": id, "scopes": [scope], "force_refresh": true])
        #expect(refreshed.status == 200, "\(refreshed.text)")
        #expect(refreshed.json["source"] as? String == "refresh")
        // The same authority without `tfp` is the same authority.
        let plain = try await Self.silent(
            stack, ["account_id": id, "scopes": [scope], "authority": "\(stack.emulator.baseURL)/\(Self.b2cTenant)/B2C_1_SUSI"])
        #expect(plain.status == 200, "\(plain.text)")
        #expect(plain.json["source"] as? String == "cache", "the same tenant written another way is the same realm")

        // Case 08: B2C's error body has only error and error_description.
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: [
                "endpoint": "token", "status": 400, "error": "invalid_grant", "error_codes": [90080],
                "error_description":
                    "The provided grant has expired. Please re-authenticate and try again. Current time: 1587023649, Grant issued time: 1586869378, Grant expiration time: 1586955778",
            ])
        let expired = try await Self.silent(stack, ["account_id": id, "scopes": [scope], "force_refresh": true])
        #expect(expired.status == 409, "\(expired.text)")
        #expect(expired.json["error"] as? String == "interaction_required")
        #expect(expired.json["account_state"] as? String == "interaction_required")
        let before = try await stack.emulatorCount()
        let again = try await Self.silent(stack, ["account_id": id, "scopes": [scope]])
        #expect(again.status == 409)
        #expect(try await stack.emulatorCount() == before)
    }

    @Test("An unknown authority is 400 invalid_authority and the authority sees no request")
    func unknownAuthority() async throws {
        let stack = try await InProcessApp(name: "inproc_authority")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let tokensBefore = try await stack.emulatorCount()
        let authorizeBefore = try await stack.emulatorCount("authorize_requests")
        for authority in [
            "https://login.evil.example/common", "https://contoso.b2clogin.com/tfp/contoso.onmicrosoft.com/B2C_1_susi", "http://127.0.0.1:1/common",
        ] {
            let silent = try await Self.silent(stack, ["account_id": id, "scopes": ["User.Read"], "authority": authority, "force_refresh": true])
            #expect(silent.status == 400, "\(silent.text)")
            #expect(silent.json["error"] as? String == "invalid_authority")
            #expect(silent.json["field"] as? String == "authority")
            let signIn = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "authority": authority])
            #expect(signIn.json["error"] as? String == "invalid_authority")
            let imported = try await stack.request(
                "POST", "/v1/accounts/import", json: ["username": "x@contoso.example", "refresh_token": "rt", "authority": authority])
            #expect(imported.status == 400)
            #expect(imported.json["error"] as? String == "invalid_authority")
        }
        // A well-known host takes any tenant, but not any text: these were a 201 sign-in whose
        // authorize_url held the line break or the dot segment, and a 201 import whose realm did.
        for authority in [
            "https://login.microsoftonline.com/..", "https://login.microsoftonline.com/t\r\nX-Evil: y", "https://login.microsoftonline.com/_control",
        ] {
            let signIn = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "authority": authority])
            #expect(signIn.status == 400, "\(authority.debugDescription): \(signIn.text)")
            #expect(signIn.json["error"] as? String == "invalid_authority")
            #expect(signIn.json["field"] as? String == "authority")
            let imported = try await stack.request(
                "POST", "/v1/accounts/import", json: ["username": "x@contoso.example", "refresh_token": "rt", "authority": authority])
            #expect(imported.status == 400, "\(authority.debugDescription): \(imported.text)")
            #expect(imported.json["field"] as? String == "authority")
        }
        #expect(try await stack.emulatorCount() == tokensBefore)
        #expect(try await stack.emulatorCount("authorize_requests") == authorizeBefore)
        // A well-known alias of the account's cloud that is another environment is refused too.
        let otherCloud = try await Self.silent(stack, ["account_id": id, "scopes": ["User.Read"], "authority": "https://login.windows.net/common"])
        #expect(otherCloud.status == 400)
        #expect(try await stack.emulatorCount() == tokensBefore)
    }

    @Test("Scope rules before any network call; legacy resource; case-insensitive cache hits")
    func scopeRules() async throws {
        let stack = try await InProcessApp(name: "inproc_scopes")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        let before = try await stack.emulatorCount()
        let invalid: [[String: Any]] = [
            ["scopes": ["openid", "profile", "offline_access", "email"]],
            ["scopes": ["User.Read", "https://management.azure.com/user_impersonation"]],
            ["scopes": ["https://graph.microsoft.com/.default", "User.Read"]],
            ["scopes": ["User.Read"], "resource": "https://graph.microsoft.com"],
            ["scopes": []],
        ]
        for body in invalid {
            var request = body
            request["account_id"] = id
            request["force_refresh"] = true
            let refused = try await Self.silent(stack, request)
            #expect(refused.status == 400, "\(body): \(refused.text)")
            #expect(refused.json["error"] as? String == "invalid_scope", "\(body)")
        }
        #expect(try await stack.emulatorCount() == before, "an invalid scope request reached the STS")

        let legacy = try await Self.silent(stack, ["account_id": id, "resource": "https://graph.microsoft.com"])
        #expect(legacy.status == 200, "\(legacy.text)")
        #expect((legacy.json["scopes"] as? [String])?.contains("https://graph.microsoft.com/.default") == true)
        let slash = try await Self.silent(stack, ["account_id": id, "resource": "https://management.core.windows.net/"])
        #expect(slash.status == 200, "\(slash.text)")
        #expect((slash.json["scopes"] as? [String])?.contains("https://management.core.windows.net//.default") == true)
        // The same /.default request again is a cache hit.
        let again = try await Self.silent(stack, ["account_id": id, "scopes": ["https://management.core.windows.net//.default"]])
        #expect(again.json["source"] as? String == "cache")
        // Case and prefix do not matter; OIDC scopes added by the caller change nothing.
        let mixedCase = try await Self.silent(stack, ["account_id": id, "scopes": ["HTTPS://graph.microsoft.com/USER.READ", "openid", "offline_access"]])
        #expect(mixedCase.status == 200)
        #expect(mixedCase.json["source"] as? String == "cache")
        #expect((mixedCase.json["scopes"] as? [String])?.contains("User.Read") == true)
    }

    @Test("13-refresh-token-rotation-success: digit-string numbers, refresh_in, ext_expires_in and foci are read and stored")
    func lenientTokenResponses() async throws {
        let stack = try await InProcessApp(name: "inproc_lenient")
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control(
            "POST", "/_control/users/alice@contoso.example",
            json: ["numbers_as_strings": true, "expires_in": 4213, "ext_expires_in": 8426, "refresh_in": 2106, "foci": "1"])
        let start = Int(Date().timeIntervalSince1970)
        let refreshed = try await Self.silent(stack, ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(refreshed.status == 200, "\(refreshed.text)")
        let expiresOn = try #require(refreshed.json["expires_on"] as? Int)
        #expect(expiresOn >= start + 4213 && expiresOn <= start + 4213 + 60)  // expires_in, never refresh_in
        #expect(refreshed.json["ext_expires_on"] as? Int == expiresOn + 4213)
        let stored = try await stack.withDatabase { connection in
            let token = try connection.query("SELECT expires_on, refresh_on FROM access_tokens WHERE account_id = $1", [.text(id)]).rows.first
            let family = try connection.query("SELECT family_id FROM refresh_tokens WHERE account_id = $1", [.text(id)]).rows.first
            return (token?.int("expires_on"), token?.int("refresh_on"), family?.string("family_id"))
        }
        #expect(stored.0 == Int64(expiresOn))
        #expect(stored.1 == Int64(expiresOn - 4213 + 2106))
        #expect(stored.2 == "1")
        // The next rotation without foci keeps the stored family id as information only.
        _ = try await stack.control("POST", "/_control/users/alice@contoso.example", json: ["numbers_as_strings": false, "foci": NSNull()])
        #expect(try await Self.silent(stack, ["account_id": id, "scopes": ["User.Read"], "force_refresh": true]).status == 200)
    }

    @Test("A guest signed into two tenants is one account with two tenant profiles; tokens are kept per realm")
    func guestAccount() async throws {
        let stack = try await InProcessApp(name: "inproc_guest")
        defer { stack.stop() }
        let home = try await Self.signIn(stack, "erin@contoso.example", authority: "\(stack.emulator.baseURL)/\(stack.tenantId)", scopes: ["User.Read"])
        let id = try #require(home["account_id"] as? String)
        let guest = try await Self.signIn(stack, "erin@contoso.example", authority: "\(stack.emulator.baseURL)/\(Self.fabrikam)", scopes: ["User.Read"])
        #expect(guest["account_id"] as? String == id)
        #expect(guest["home_account_id"] as? String == home["home_account_id"] as? String)
        #expect(guest["realm"] as? String == stack.tenantId)
        #expect(guest["local_account_id"] as? String == "eeeeeeee-0000-4000-8000-00000000e410")
        #expect((guest["id_token_claims"] as? [String: Any])?["tid"] as? String == stack.tenantId)
        let profiles = try #require(guest["tenant_profiles"] as? [[String: Any]])
        #expect(profiles.count == 2)
        #expect(profiles.first { $0["realm"] as? String == stack.tenantId }?["is_home"] as? Bool == true)
        let guestProfile = try #require(profiles.first { $0["realm"] as? String == Self.fabrikam })
        #expect(guestProfile["is_home"] as? Bool == false)
        #expect(guestProfile["local_account_id"] as? String == "eeeeeeee-0000-4000-8000-0000000f0e57")

        // tenant_id filters match any profile.
        let listed = try await stack.request("GET", "/v1/accounts?tenant_id=\(Self.fabrikam)")
        #expect((listed.json["accounts"] as? [[String: Any]])?.map { $0["account_id"] as? String } == [id])
        let byName = try await Self.silent(stack, ["username": "erin@contoso.example", "tenant_id": Self.fabrikam, "scopes": ["User.Read"]])
        #expect(byName.status == 200, "\(byName.text)")

        // One refresh token serves both tenants; each realm has its own access token.
        let inGuest = try await Self.silent(
            stack, ["account_id": id, "scopes": ["Mail.Read"], "authority": "\(stack.emulator.baseURL)/\(Self.fabrikam)"])
        #expect(inGuest.status == 200, "\(inGuest.text)")
        let inHome = try await Self.silent(stack, ["account_id": id, "scopes": ["Mail.Read"]])
        #expect(inHome.status == 200, "\(inHome.text)")
        #expect(inHome.json["access_token"] as? String != inGuest.json["access_token"] as? String)
        let realms = try await stack.withDatabase { connection in
            try connection.query("SELECT DISTINCT realm FROM access_tokens WHERE account_id = $1 ORDER BY realm", [.text(id)]).rows.compactMap {
                $0.string("realm")
            }
        }
        #expect(realms == [stack.tenantId, Self.fabrikam])
    }

    @Test("An ADAL refresh token is imported encrypted, found by username, identified on first use")
    func importThenIdentify() async throws {
        let stack = try await InProcessApp(name: "inproc_import")
        defer { stack.stop() }
        let adalToken = try await stack.adalRefreshToken(for: "bob@contoso.example")
        let authority = "\(stack.emulator.baseURL)/organizations"

        let bad = try await stack.request("POST", "/v1/accounts/import", json: ["username": "bob@contoso.example", "authority": authority])
        #expect(bad.status == 400)
        #expect(bad.json["field"] as? String == "refresh_token")
        // Not a token: these went on to the STS as given (an import answered 201 for each).
        for notAToken in ["   ", "0.AXY\r\nA", "0.AXY A", "0.AXY\u{1}", "0.AXYé"] {
            let refused = try await stack.request(
                "POST", "/v1/accounts/import", json: ["username": "bob@contoso.example", "refresh_token": notAToken, "authority": authority])
            #expect(refused.status == 400, "\(notAToken.debugDescription): \(refused.text)")
            #expect(refused.json["field"] as? String == "refresh_token")
        }
        // NUL in any string member is refused naming that member (it was `field: input`, from the database).
        for member in ["username", "refresh_token", "authority"] {
            var body: [String: Any] = ["username": "bob@contoso.example", "refresh_token": adalToken, "authority": authority]
            body[member] = "\(body[member]!)\u{0}"
            let refused = try await stack.request("POST", "/v1/accounts/import", json: body)
            #expect(refused.status == 400, "\(member): \(refused.text)")
            #expect(refused.json["field"] as? String == member)
        }
        let nulAccount = try await Self.silent(stack, ["account_id": "acc_x\u{0}", "scopes": ["User.Read"]])
        #expect(nulAccount.status == 400 && nulAccount.json["field"] as? String == "account_id", "\(nulAccount.text)")
        let badResource = try await stack.request(
            "POST", "/v1/accounts/import",
            json: ["username": "bob@contoso.example", "refresh_token": adalToken, "authority": authority, "resource": "a b"])
        #expect(badResource.json["error"] as? String == "invalid_scope")

        let imported = try await stack.request(
            "POST", "/v1/accounts/import",
            json: ["username": "bob@contoso.example", "refresh_token": adalToken, "authority": authority, "resource": "https://graph.microsoft.com"])
        #expect(imported.status == 201, "\(imported.text)")
        let id = try #require(imported.json["account_id"] as? String)
        #expect(imported.json["home_account_id"] is NSNull)
        #expect(imported.json["username"] as? String == "bob@contoso.example")
        #expect(imported.json["tenant_profiles"] as? [Any] == nil || (imported.json["tenant_profiles"] as? [Any])?.isEmpty == true)

        // Encrypted before it touched disk; audited.
        let (ciphertexts, audit) = try await stack.withDatabase { connection in
            let rows = try connection.query("SELECT ciphertext FROM refresh_tokens WHERE account_id = $1", [.text(id)]).rows.compactMap {
                $0.bytes("ciphertext")
            }
            let audit = try connection.query("SELECT action FROM audit_events WHERE account_id = $1", [.text(id)]).rows.compactMap { $0.string("action") }
            return (rows, audit)
        }
        #expect(ciphertexts.count == 1)
        #expect(!String(decoding: ciphertexts[0], as: UTF8.self).contains(adalToken))
        #expect(audit.contains("account.imported"))

        // Importing the same username again replaces the pending import's token: no duplicate.
        let again = try await stack.request(
            "POST", "/v1/accounts/import", json: ["username": "BOB@contoso.example", "refresh_token": adalToken, "authority": authority])
        #expect(again.status == 200, "\(again.text)")
        #expect(again.json["account_id"] as? String == id)
        let found = try await stack.request("GET", "/v1/accounts?username=BOB@contoso.example")
        #expect((found.json["accounts"] as? [[String: Any]])?.map { $0["account_id"] as? String } == [id])

        let first = try await Self.silent(stack, ["username": "bob@contoso.example", "scopes": ["User.Read"]])
        #expect(first.status == 200, "\(first.text)")
        #expect(first.json["source"] as? String == "refresh")
        let account = try #require(first.json["account"] as? [String: Any])
        #expect(account["account_id"] as? String == id)
        #expect(account["home_account_id"] as? String == "bbbbbbbb-0000-4000-8000-000000000b0b.\(stack.tenantId)")
        #expect(account["realm"] as? String == stack.tenantId)
        #expect(account["local_account_id"] as? String == "bbbbbbbb-0000-4000-8000-000000000b0b")
        #expect((account["tenant_profiles"] as? [[String: Any]])?.count == 1)
        // From now on a normal account: cache, then rotation with the token the import rotated.
        #expect(try await Self.silent(stack, ["account_id": id, "scopes": ["User.Read"]]).json["source"] as? String == "cache")
        let rotated = try await Self.silent(stack, ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(rotated.status == 200, "\(rotated.text)")
    }

    @Test("An import whose user is signed in already merges into that account; the imported id stays an alias")
    func importMergesIntoSignedInAccount() async throws {
        let stack = try await InProcessApp(name: "inproc_import_merge")
        defer { stack.stop() }
        let survivor = try await stack.signInAccountId("alice@contoso.example")
        let adalToken = try await stack.adalRefreshToken(for: "alice@contoso.example")
        let imported = try await stack.request(
            "POST", "/v1/accounts/import",
            json: ["username": "alice@contoso.example", "refresh_token": adalToken, "authority": "\(stack.emulator.baseURL)/\(stack.tenantId)"])
        let importedId = try #require(imported.json["account_id"] as? String)
        #expect(importedId != survivor)
        // Two accounts share the username until the import is identified.
        let ambiguous = try await Self.silent(stack, ["username": "alice@contoso.example", "scopes": ["User.Read"]])
        #expect(ambiguous.status == 409)
        #expect(ambiguous.json["error"] as? String == "ambiguous_account")

        let first = try await Self.silent(stack, ["account_id": importedId, "scopes": ["Mail.Read"]])
        #expect(first.status == 200, "\(first.text)")
        #expect((first.json["account"] as? [String: Any])?["account_id"] as? String == survivor)

        // The imported id resolves to the survivor everywhere; the username is one account again.
        let fetched = try await stack.request("GET", "/v1/accounts/\(importedId)")
        #expect(fetched.status == 200)
        #expect(fetched.json["account_id"] as? String == survivor)
        let byName = try await Self.silent(stack, ["username": "alice@contoso.example", "scopes": ["Mail.Read"]])
        #expect(byName.status == 200, "\(byName.text)")
        #expect(byName.json["source"] as? String == "cache")  // the merged token, re-encrypted for the survivor
        let downstream = try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": importedId])
        #expect(downstream.status == 200, "\(downstream.text)")
        let (accounts, aliases, audit, moved) = try await stack.withDatabase { connection in
            let accounts = try connection.query("SELECT account_id FROM accounts WHERE lower(username) = 'alice@contoso.example'").rows.count
            let moved = try connection.query("SELECT account_id FROM access_tokens WHERE target = 'mail.read'").rows.compactMap { $0.string("account_id") }
            let aliases = try connection.query("SELECT account_id FROM account_aliases WHERE alias_account_id = $1", [.text(importedId)]).rows.compactMap {
                $0.string("account_id")
            }
            let audit = try connection.query("SELECT action FROM audit_events WHERE account_id = $1", [.text(survivor)]).rows.compactMap { $0.string("action") }
            return (accounts, aliases, audit, moved)
        }
        #expect(accounts == 1)
        #expect(moved == [survivor])
        #expect(aliases == [survivor])
        #expect(audit.contains("account.import_merged"))
        // The survivor's own refresh token still works (strict rotation at the emulator).
        let refreshed = try await Self.silent(stack, ["account_id": survivor, "scopes": ["User.Read"], "force_refresh": true])
        #expect(refreshed.status == 200, "\(refreshed.text)")
        // Deleting through the alias signs the survivor out.
        #expect(try await stack.request("DELETE", "/v1/accounts/\(importedId)").status == 204)
        #expect(try await stack.request("GET", "/v1/accounts/\(survivor)").status == 404)
    }

    @Test("An import merging into an account whose refresh token died gives it the imported token and makes it active")
    func importRevivesDeadAccount() async throws {
        let stack = try await InProcessApp(name: "inproc_import_revive")
        defer { stack.stop() }
        let survivor = try await stack.signInAccountId("bob@contoso.example")
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: ["endpoint": "token", "status": 400, "error": "invalid_grant", "error_codes": [700082], "suberror": "bad_token"])
        let dead = try await Self.silent(stack, ["account_id": survivor, "scopes": ["User.Read"], "force_refresh": true])
        #expect(dead.json["account_state"] as? String == "interaction_required")

        let adalToken = try await stack.adalRefreshToken(for: "bob@contoso.example")
        let imported = try await stack.request(
            "POST", "/v1/accounts/import",
            json: [
                "username": "bob@contoso.example", "refresh_token": adalToken,
                "authority": "\(stack.emulator.baseURL)/\(stack.tenantId)",
            ])
        let importedId = try #require(imported.json["account_id"] as? String)
        let first = try await Self.silent(stack, ["account_id": importedId, "scopes": ["User.Read"]])
        #expect(first.status == 200, "\(first.text)")
        let account = try #require(first.json["account"] as? [String: Any])
        #expect(account["account_id"] as? String == survivor)
        #expect(account["state"] as? String == "active")
        // The survivor now refreshes with the imported (rotated) refresh token.
        let refreshed = try await Self.silent(stack, ["account_id": survivor, "scopes": ["Mail.Read"], "force_refresh": true])
        #expect(refreshed.status == 200, "\(refreshed.text)")
    }
}
