import CryptoBridge
import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// `token-relay` sub-commands against the same database a running service uses.
@Suite("token-relay command line", .serialized)
struct CommandLineTests {
    /// Runs the built `token-relay` with `arguments`; returns (exit status, standard output).
    static func run(_ arguments: [String], environment: [String: String]) async throws -> (Int32, String) {
        let run = try await BuiltProducts.run("token-relay", arguments, environment: environment)
        return (run.status, run.output)
    }

    @Test("api-keys create prints the key once; it authenticates with exactly its permissions; list and revoke are audited")
    func apiKeys() async throws {
        let stack = try await TokenRelayStack(name: "e2e_cli")
        defer { stack.stop() }
        let environment = ["TOKENRELAY_DATABASE_URL": stack.databaseURL, "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin"]
        let (status, output) = try await Self.run(["api-keys", "create", "--name", "reporting", "--permissions", "accounts:read"], environment: environment)
        #expect(status == 0)
        let created = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        let key = try #require(created["api_key"] as? String)
        let keyId = try #require(created["key_id"] as? String)
        #expect(key.hasPrefix("trk_\(keyId)_"))
        try await StackHelpers.awaitKnown(key, on: [stack.baseURL], stack)

        let allowed = try await stack.request("GET", "/v1/accounts", headers: ["Authorization": "Bearer \(key)"], authenticated: false)
        #expect(allowed.status == 200)
        let forbidden = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": "a", "scopes": ["User.Read"]], headers: ["Authorization": "Bearer \(key)"], authenticated: false)
        #expect(forbidden.status == 403)
        #expect(forbidden.json["error"] as? String == "forbidden")
        let wrongSecret = try await stack.request("GET", "/v1/accounts", headers: ["Authorization": "Bearer trk_\(keyId)_wrong"], authenticated: false)
        #expect(wrongSecret.status == 401)

        let (_, listed) = try await Self.run(["api-keys", "list"], environment: environment)
        #expect(listed.contains(keyId))
        #expect(!listed.contains(key))
        #expect(try await Self.run(["api-keys", "revoke", keyId], environment: environment).0 == 0)
        #expect(try await Self.run(["api-keys", "create", "--name", "x", "--permissions", "everything"], environment: environment).0 == 2)

        let actions = try await stack.withDatabase { connection in
            try connection.query("SELECT action FROM audit_events ORDER BY id").rows.compactMap { $0.string("action") }
        }
        #expect(actions == ["api_key.created", "api_key.revoked"])
        let stored = try await stack.withDatabase { connection in
            try connection.query("SELECT encode(secret_hash, 'hex') AS h FROM api_keys").rows.compactMap { $0.string("h") }
        }
        #expect(stored.count == 1 && !key.contains(stored[0]))
    }

    @Test("accounts list pages like the API, show prints one account, delete is audited and emits account.deleted")
    func accounts() async throws {
        let stack = try await TokenRelayStack(name: "e2e_cli_accounts")
        defer { stack.stop() }
        let alice = try await stack.signInAccountId("alice@contoso.example")
        let bob = try await stack.signInAccountId("bob@contoso.example")
        let environment = ["TOKENRELAY_DATABASE_URL": stack.databaseURL]
        func json(_ text: String) -> [String: Any] { (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:] }

        let (status, firstText) = try await Self.run(["accounts", "list", "--limit", "1"], environment: environment)
        #expect(status == 0)
        let first = json(firstText)
        let cursor = try #require(first["next_cursor"] as? String)
        let second = json(try await Self.run(["accounts", "list", "--limit", "1", "--cursor", cursor], environment: environment).1)
        #expect(second["next_cursor"] is NSNull)
        let listed = [first, second].flatMap { ($0["accounts"] as? [[String: Any]] ?? []).compactMap { $0["account_id"] as? String } }
        #expect(Set(listed) == [alice, bob])
        let api = try await stack.request("GET", "/v1/accounts/\(alice)")
        var shown = json(try await Self.run(["accounts", "show", alice], environment: environment).1)
        #expect(shown["username"] as? String == "alice@contoso.example")
        // Plus the operator-only token issuance counts (behaviour §12 Audit; IssuanceCountTests).
        #expect(shown.removeValue(forKey: "issuance") is [Any])
        // And the refresh token's state and chain (CommandLineTests.accountsShowLineage).
        #expect(shown.removeValue(forKey: "refresh_token") is [String: Any])
        // And every owner's external ids (behaviour §3.7; none here).
        #expect((shown.removeValue(forKey: "external_ids") as? [String: Any])?.isEmpty == true)
        #expect(NSDictionary(dictionary: shown).isEqual(to: api.json), "the CLI prints the API's account object")
        #expect(try await Self.run(["accounts", "show", "acc_missing"], environment: environment).0 == 1)
        #expect(try await Self.run(["accounts", "list", "--limit", "0"], environment: environment).0 == 2)

        let deleted = json(try await Self.run(["accounts", "delete", alice], environment: environment).1)
        #expect(deleted["deleted"] as? Bool == true)
        #expect(json(try await Self.run(["accounts", "delete", alice], environment: environment).1)["deleted"] as? Bool == false)
        #expect(try await stack.request("GET", "/v1/accounts/\(alice)").status == 404)
        let audit = try await stack.withDatabase { connection in
            try connection.query("SELECT actor, outcome FROM audit_events WHERE action = 'account.deleted' ORDER BY id").rows.map {
                "\($0.string("actor") ?? "") \($0.string("outcome") ?? "")"
            }
        }
        #expect(audit == ["cli deleted", "cli absent"])
        // The sign-ins' own events (account.signed_in) aside.
        let events = (try await stack.request("GET", "/v1/events").json["events"] as? [[String: Any]] ?? []).filter {
            $0["type"] as? String != "account.signed_in"
        }
        #expect(events.map { $0["type"] as? String } == ["account.deleted"])
        #expect(events.first?["account_id"] as? String == alice)
        #expect((events.first?["data"] as? [String: Any])?["actor"] as? String == "cli")
    }

    @Test("accounts list --tenant-id matches tenants like the API's tenant_id: any tenant profile, any case")
    func accountsListByTenant() async throws {
        let stack = try await TokenRelayStack(name: "e2e_cli_accounts_tenant")
        defer { stack.stop() }
        let alice = try await stack.signInAccountId("alice@contoso.example")
        _ = try await stack.signInAccountId("bob@contoso.example")
        let environment = ["TOKENRELAY_DATABASE_URL": stack.databaseURL]
        // Alice is also a guest in another tenant (a profile of her account, behaviour §12 Accounts).
        try await stack.withDatabase { connection in
            _ = try connection.query(
                "INSERT INTO account_tenant_profiles (account_id, realm, local_account_id, is_home) VALUES ($1, '33333333-3333-3333-3333-33333333aaaa', NULL, false)",
                [.text(alice)])
        }
        for tenant in ["33333333-3333-3333-3333-33333333aaaa", "33333333-3333-3333-3333-33333333AAAA"] {
            let api = try await stack.request("GET", "/v1/accounts?tenant_id=\(tenant)")
            let apiIds = (api.json["accounts"] as? [[String: Any]] ?? []).compactMap { $0["account_id"] as? String }
            #expect(apiIds == [alice], "\(tenant)")
            let (status, text) = try await Self.run(["accounts", "list", "--tenant-id", tenant], environment: environment)
            #expect(status == 0)
            let listed = (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])?["accounts"] as? [[String: Any]] ?? []
            #expect(listed.compactMap { $0["account_id"] as? String } == apiIds, "the CLI lists the API's rows for \(tenant)")
        }
        // An empty value is the filter not given, as `username=` and `tenant_id=` are to the API; `--username ''` listed no one.
        let api = try await stack.request("GET", "/v1/accounts?username=&tenant_id=")
        let apiIds = (api.json["accounts"] as? [[String: Any]] ?? []).compactMap { $0["account_id"] as? String }
        #expect(apiIds.count == 2)
        for arguments in [["--username", ""], ["--tenant-id", ""], ["--username", "", "--tenant-id", ""]] {
            let (status, text) = try await Self.run(["accounts", "list"] + arguments, environment: environment)
            #expect(status == 0, "\(arguments)")
            let listed = (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])?["accounts"] as? [[String: Any]] ?? []
            #expect(listed.compactMap { $0["account_id"] as? String } == apiIds, "\(arguments): \(text)")
        }
    }

    @Test("accounts show with a merged import's id prints the survivor, as GET /v1/accounts/{id} does")
    func accountsShowByAlias() async throws {
        let stack = try await TokenRelayStack(name: "e2e_cli_accounts_alias")
        defer { stack.stop() }
        let survivor = try await stack.signInAccountId("alice@contoso.example")
        let adalToken = try await stack.adalRefreshToken(for: "alice@contoso.example")
        let imported = try await stack.request(
            "POST", "/v1/accounts/import",
            json: ["username": "alice@contoso.example", "refresh_token": adalToken, "authority": "\(stack.emulator.baseURL)/\(stack.tenantId)"])
        let importedId = try #require(imported.json["account_id"] as? String)
        // The first redemption identifies the import and merges it into the signed-in account.
        let merged = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": importedId, "scopes": ["Mail.Read"]])
        #expect(merged.status == 200, "\(merged.text)")
        #expect(try await stack.request("GET", "/v1/accounts/\(importedId)").json["account_id"] as? String == survivor)

        let (status, text) = try await Self.run(["accounts", "show", importedId], environment: ["TOKENRELAY_DATABASE_URL": stack.databaseURL])
        #expect(status == 0)
        let shown = (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
        #expect(shown["account_id"] as? String == survivor, "the CLI resolves the alias like the API")
    }

    /// `accounts show ID` parsed; its `refresh_token` member and that member's `lineage`.
    static func showRefreshToken(_ id: String, environment: [String: String]) async throws -> (text: String, refreshToken: Any?, lineage: [[String: Any]]) {
        let (status, text) = try await run(["accounts", "show", id], environment: environment)
        #expect(status == 0, "\(text)")
        let shown = (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
        let refreshToken = shown["refresh_token"]
        return (text, refreshToken, (refreshToken as? [String: Any])?["lineage"] as? [[String: Any]] ?? [])
    }

    @Test("accounts show prints the refresh token's generation, lease and chain newest first, with fingerprints and no secret")
    func accountsShowLineage() async throws {
        let stack = try await TokenRelayStack(name: "e2e_cli_lineage")
        defer { stack.stop() }
        let id = try await stack.signInAccountId("alice@contoso.example")
        for _ in 0..<2 {
            let refreshed = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
            #expect(refreshed.status == 200, "\(refreshed.text)")
        }
        let environment = ["TOKENRELAY_DATABASE_URL": stack.databaseURL]
        let (text, member, lineage) = try await Self.showRefreshToken(id, environment: environment)
        let refreshToken = try #require(member as? [String: Any], "\(text)")
        #expect(Set(refreshToken.keys) == ["generation", "rotated_at", "family_id", "lease", "lineage"])
        #expect(refreshToken["lease"] is NSNull, "the lease is released after each refresh")
        let rotatedAt = try #require(refreshToken["rotated_at"] as? String)
        #expect(rotatedAt.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/) != nil, "\(rotatedAt)")

        #expect(lineage.count == 3, "\(text)")
        #expect(lineage.map { $0["cause"] as? String } == ["rotation", "rotation", "sign_in"])
        let generations = lineage.compactMap { ($0["generation"] as? NSNumber)?.int64Value }
        #expect(generations.count == 3)
        #expect(zip(generations, generations.dropFirst()).allSatisfy { $0 == $1 + 1 }, "strictly decreasing by 1: \(generations)")
        #expect((refreshToken["generation"] as? NSNumber)?.int64Value == generations.first, "the row is at the newest link")
        for (newer, older) in zip(lineage, lineage.dropFirst()) {
            #expect(newer["replaced_fingerprint"] as? String == older["fingerprint"] as? String, "each link replaced the next older one")
        }
        #expect(lineage.last?["replaced_fingerprint"] is NSNull, "a sign-in starts the chain")
        for link in lineage {
            #expect(Set(link.keys) == ["generation", "fingerprint", "replaced_fingerprint", "cause", "recorded_at"])
            let fingerprint = try #require(link["fingerprint"] as? String)
            #expect(fingerprint.wholeMatch(of: /[0-9a-f]{16}/) != nil, "\(fingerprint)")
            #expect((link["recorded_at"] as? String)?.hasSuffix("Z") == true)
        }
        #expect(Set(lineage.compactMap { $0["fingerprint"] as? String }).count == 3, "three different tokens")

        // No secret: none of the emulator's tokens and codes, nor the stored row's ciphertext, nonce or key id.
        let issued = try await stack.issuedSecrets()
        #expect(issued.refreshTokens.count >= 3)
        // Each fingerprint names a refresh token the emulator issued: SHA-256's first 8 bytes in hex.
        let fingerprints = Set(issued.refreshTokens.map { token in SHA256.hash(Array(token.utf8)).prefix(8).map { String(format: "%02x", $0) }.joined() })
        #expect(lineage.allSatisfy { fingerprints.contains($0["fingerprint"] as? String ?? "") }, "\(text)")
        for secret in issued.refreshTokens + issued.accessTokens + issued.idTokens + issued.codes {
            #expect(!text.contains(secret), "accounts show prints no token or code")
        }
        let stored = try await stack.withDatabase { connection in
            try connection.query(
                "SELECT key_id, encode(nonce, 'hex') AS nonce, encode(ciphertext, 'hex') AS ct, encode(ciphertext, 'base64') AS b64 FROM refresh_tokens WHERE account_id = $1",
                [.text(id)]
            ).rows.first.map { row in ["key_id", "nonce", "ct", "b64"].map { row.string($0) ?? "" } } ?? []
        }
        #expect(stored.count == 4 && stored.allSatisfy { !$0.isEmpty })
        let printed = String(decoding: try JSONSerialization.data(withJSONObject: refreshToken), as: UTF8.self)
        #expect(!printed.contains("\"\(stored[0])\""), "no key id")
        for value in stored.dropFirst() {
            #expect(!text.contains(value.prefix(24)), "no nonce or ciphertext")
        }

        // A lease a replica holds now is shown with its end; an expired one is no lease.
        for (interval, held) in [("30 seconds", true), ("-1 second", false)] {
            try await stack.withDatabase { connection in
                _ = try connection.query(
                    "UPDATE refresh_tokens SET lease_owner = 'replica-x', lease_expires_at = now() + $2::interval WHERE account_id = $1",
                    [.text(id), .text(interval)])
            }
            let (leaseText, leased, _) = try await Self.showRefreshToken(id, environment: environment)
            let lease = (leased as? [String: Any])?["lease"]
            if held {
                let fields = try #require(lease as? [String: Any], "\(leaseText)")
                #expect(fields["state"] as? String == "held")
                #expect((fields["expires_at"] as? String)?.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/) != nil, "\(leaseText)")
                #expect(!leaseText.contains("replica-x"), "the lease owner is an internal id")
            } else {
                #expect(lease is NSNull, "\(leaseText)")
            }
        }
    }

    @Test("accounts show: a generation never comes back after the token died; the new sign-in's chain starts above every earlier link")
    func lineageGenerationMonotonic() async throws {
        let stack = try await TokenRelayStack(name: "e2e_cli_lineage_dead")
        defer { stack.stop() }
        let user = "alice@contoso.example"
        let id = try await stack.signInAccountId(user)
        let refreshed = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(refreshed.status == 200, "\(refreshed.text)")
        let environment = ["TOKENRELAY_DATABASE_URL": stack.databaseURL]
        let before = try await Self.showRefreshToken(id, environment: environment).lineage
        #expect(before.map { $0["cause"] as? String } == ["rotation", "sign_in"])
        let earlier = before.compactMap { ($0["generation"] as? NSNumber)?.int64Value }
        #expect(earlier.count == 2)

        // The STS revokes the token: the account needs a sign-in and its refresh token is gone.
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["revoke_refresh_tokens": true])
        let refused = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(refused.status == 409, "\(refused.text)")
        #expect(refused.json["error"] as? String == "interaction_required")
        let dead = try await Self.showRefreshToken(id, environment: environment)
        #expect(dead.refreshToken is NSNull, "no refresh token stored: \(dead.text)")

        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["revoke_refresh_tokens": false])
        #expect(try await stack.signInAccountId(user) == id)
        let (text, member, after) = try await Self.showRefreshToken(id, environment: environment)
        let refreshToken = try #require(member as? [String: Any], "\(text)")
        let first = try #require(after.first)
        #expect(first["cause"] as? String == "sign_in")
        #expect(first["replaced_fingerprint"] is NSNull)
        let generation = try #require((first["generation"] as? NSNumber)?.int64Value)
        #expect(earlier.allSatisfy { generation > $0 }, "\(generation) above \(earlier)")
        #expect((refreshToken["generation"] as? NSNumber)?.int64Value == generation)
        #expect(refreshToken["rotated_at"] is NSNull, "not rotated since the sign-in")
        #expect(after.dropFirst().compactMap { ($0["generation"] as? NSNumber)?.int64Value } == earlier, "the old links stay, older")
        let allGenerations = after.compactMap { ($0["generation"] as? NSNumber)?.int64Value }
        #expect(zip(allGenerations, allGenerations.dropFirst()).allSatisfy { $0 > $1 })

        // And the chain goes on from there.
        let again = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(again.status == 200, "\(again.text)")
        let continued = try await Self.showRefreshToken(id, environment: environment).lineage
        #expect(continued.first?["cause"] as? String == "rotation")
        #expect((continued.first?["generation"] as? NSNumber)?.int64Value == generation + 1)
        #expect(continued.first?["replaced_fingerprint"] as? String == first["fingerprint"] as? String)
    }

    @Test("--help on every command and sub-command prints usage and exits 0; an unknown option is usage on stderr and exit 2")
    func help() async throws {
        let commands: [[String]] = [
            [], ["serve"], ["migrate"], ["check-config"], ["healthcheck"], ["api-keys"], ["api-keys", "create"], ["api-keys", "list"],
            ["api-keys", "revoke"], ["encryption"], ["encryption", "generate-key"], ["accounts"], ["accounts", "list"], ["accounts", "show"],
            ["accounts", "delete"], ["keepalive"],
        ]
        for command in commands {
            for flag in ["--help", "-h"] {
                let (status, output, _) = try await KeepAliveAndEventsTests.tokenRelay(command + [flag], environment: [:])
                #expect(status == 0, "\(command) \(flag)")
                #expect(output.contains("usage: token-relay"), "\(command) \(flag)")
            }
        }
        for command in [["serve"], ["migrate"], ["accounts", "list"], ["keepalive"], ["api-keys", "create"]] {
            let (status, output, error) = try await KeepAliveAndEventsTests.tokenRelay(command + ["--no-such-option"], environment: [:])
            #expect(status == 2, "\(command)")
            #expect(output.isEmpty)
            #expect(error.contains("unknown option '--no-such-option'") && error.contains("usage: token-relay"), "\(command)")
        }
        #expect(try await KeepAliveAndEventsTests.tokenRelay(["keepalive"], environment: [:]).status == 2)
    }

    /// Each used to ignore the word: `accounts list foo` listed every account (new-user try).
    @Test("An argument no command takes is usage on stderr and exit 2 naming it, for every command and sub-command, before anything runs")
    func unexpectedArguments() async throws {
        let commands: [[String]] = [
            ["serve"], ["migrate"], ["check-config"], ["healthcheck"], ["api-keys", "create", "--name", "n", "--permissions", "admin"],
            ["api-keys", "list"], ["api-keys", "revoke", "trk_x"], ["encryption", "generate-key"], ["encryption", "rotate"],
            ["encryption", "rewrap"], ["encryption", "create-kek"], ["accounts", "list"], ["accounts", "show", "acc_x"],
            ["accounts", "delete", "acc_x"], ["tenants", "suspend", "t"], ["tenants", "resume", "t"], ["tenants", "forget", "t", "--dry-run"],
            ["tenants", "list"], ["audit", "export", "--since", "2026-12-01T00:00:00Z"], ["keepalive", "--once"], ["bench-seed", "--accounts", "1"],
        ]
        for command in commands {
            let (status, output, error) = try await KeepAliveAndEventsTests.tokenRelay(command + ["foo"], environment: [:])
            #expect(status == 2, "\(command): \(error)")
            // Not the output itself in a failure: `encryption generate-key` prints a fresh key.
            let printed = !output.isEmpty
            #expect(!printed, "\(command) printed to standard output")
            #expect(error.hasPrefix("token-relay: unexpected argument 'foo'\nusage: token-relay"), "\(command): \(error)")
        }
    }

    /// Each was taken before (found by a new-user try): `generate-key --id 'bad id!'` printed an
    /// entry `check-config` refuses, a permission listed twice was stored twice, `a,` dropped
    /// the empty value, `--name ''` printed only the generic usage, `--yes --dry-run` made a dry run,
    /// `--name bootstrap` made a key sharing the bootstrap key's imports and external ids.
    @Test("Option values are checked before anything runs: exit 2 naming the option (and the value given twice)")
    func optionValues() async throws {
        // Nothing is reached: every value is refused before the database is asked.
        let environment = ["TOKENRELAY_DATABASE_URL": "postgresql://127.0.0.1:1/none"]
        for id in ["bad id!", "a,b:c", "", String(repeating: "k", count: 33)] {
            let (status, output, error) = try await KeepAliveAndEventsTests.tokenRelay(["encryption", "generate-key", "--id", id], environment: [:])
            #expect(status == 2 && output.isEmpty, "--id '\(id)': \(status)")
            #expect(error.hasPrefix("token-relay: --id: key id must be 1-32 characters of [A-Za-z0-9_-]"), "\(error)")
        }
        let (status, output, _) = try await KeepAliveAndEventsTests.tokenRelay(["encryption", "generate-key", "--id", "k-2026_12"], environment: [:])
        #expect(status == 0 && output.hasPrefix("k-2026_12:"))

        let create = ["api-keys", "create", "--name", "x"]
        let refused: [([String], String)] = [
            (["api-keys", "create", "--name", "", "--permissions", "tokens:acquire"], "--name must be"),
            (["api-keys", "create", "--permissions", "tokens:acquire"], "api-keys create needs --name"),
            // The bootstrap key's owner, and a name that reads as another (found by a new-user try).
            (["api-keys", "create", "--name", "bootstrap", "--permissions", "tokens:acquire"], "--name 'bootstrap' is reserved"),
            (["api-keys", "create", "--name", " Bootstrap ", "--permissions", "tokens:acquire"], "--name 'bootstrap' is reserved"),
            (["api-keys", "create", "--name", "\u{202E}nimda", "--permissions", "tokens:acquire"], "--name must be"),
            (create + ["--permissions", "tokens:acquire,tokens:acquire"], "--permissions: 'tokens:acquire' is given twice"),
            (create + ["--permissions", "tokens:acquire,"], "--permissions holds an empty value"),
            (create + ["--permissions", "tokens:acquire,,accounts:read"], "--permissions holds an empty value"),
            (create + ["--permissions", ","], "--permissions names no value"),
            (create + ["--permissions", "tokens:acquire", "--scopes", "User.*,User.*"], "--scopes: 'User.*' is given twice"),
            (create + ["--permissions", "tokens:acquire", "--scopes", "User.*, user.*"], "--scopes: 'user.*' is given twice"),
            (create + ["--permissions", "tokens:acquire", "--scopes", "User.*,"], "--scopes holds an empty value"),
            (create + ["--permissions", "tokens:acquire", "--tenants", "contoso.example,Contoso.example"], "--tenants: 'Contoso.example' is given twice"),
            (create + ["--permissions", "tokens:acquire", "--tenants", ",contoso.example"], "--tenants holds an empty value"),
            (create + ["--permissions", "tokens:acquire", "--tenants", " "], "--tenants names no value"),
            (["tenants", "forget", "72f988bf-86f1-41af-91ab-2d7cd011db47", "--yes", "--dry-run"], "tenants forget takes --yes or --dry-run, not both"),
        ]
        for (arguments, message) in refused {
            let (status, output, error) = try await KeepAliveAndEventsTests.tokenRelay(arguments, environment: environment)
            #expect(status == 2 && output.isEmpty, "\(arguments): \(status) \(error)")
            #expect(error.hasPrefix("token-relay: \(message)"), "\(arguments): \(error)")
        }
    }

    @Test("check-config names the bad setting and exits 2")
    func checkConfig() async throws {
        let (status, _) = try await Self.run(["check-config"], environment: ["TOKENRELAY_CLIENT_ID": "x"])
        #expect(status == 2)
    }
}
