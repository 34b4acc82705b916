import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// Per-tenant data keys (issue 12 part 1, ADR 0017) on the built binaries: crypto-shredding with
/// `tenants forget`, checked on a `pg_dump`; and the key-encryption key in SoftHSM2.
@Suite("Tenant data keys: forget, pg_dump, key-encryption key in SoftHSM2", .serialized)
struct TenantDataKeyTests {
    static let contoso = TenantSuspensionTests.contoso
    static let fabrikam = TenantSuspensionTests.fabrikam

    static func silent(_ stack: TokenRelayStack, _ accountId: String, force: Bool = false) async throws -> TestResponse {
        try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": accountId, "scopes": ["User.Read"], "force_refresh": force])
    }

    static func dataKeyId(_ stack: TokenRelayStack, tenant: String) async throws -> String? {
        try await stack.withDatabase { connection in
            try connection.query("SELECT data_key_id FROM data_keys WHERE tenant_id = $1", [.text(tenant)]).rows.first?.string("data_key_id")
        }
    }

    /// `pg_dump` of the stack's database, data only, as text.
    static func dump(_ stack: TokenRelayStack) async throws -> String {
        let installed = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        let bin = try #require(installed.compactMap(Int.init).sorted().last.map { "/usr/lib/postgresql/\($0)/bin/pg_dump" })
        let run = try await BuiltProducts.run(executableAt: bin, ["--data-only", "--no-owner", stack.databaseURL], environment: nil)
        #expect(run.status == 0, "\(run.error)")
        return run.output
    }

    /// The data lines of the dump's `COPY public.<table>` sections for `tables`.
    static func copySections(of dump: String, tables: [String]) -> String {
        var lines: [Substring] = []
        var inside = false
        for line in dump.split(separator: "\n", omittingEmptySubsequences: false) {
            if inside {
                if line == "\\." { inside = false } else { lines.append(line) }
            } else if tables.contains(where: { line.hasPrefix("COPY public.\($0) (") }) {
                inside = true
            }
        }
        return lines.joined(separator: "\n")
    }

    @Test("tenants forget deletes the tenant's accounts and destroys its data key: the dump holds nothing of it, a restored row does not open, others serve")
    func forgetShredsTheTenant() async throws {
        let stack = try await TokenRelayStack(name: "e2e_tenant_forget")
        defer { stack.stop() }
        let alice = try await stack.signInAccountId("alice@contoso.example")
        let carol = try #require(
            try await StackHelpers.signIn(
                stack, "carol@fabrikam.example", authority: "\(stack.emulator.baseURL)/\(Self.fabrikam)", scopes: ["User.Read"])["account_id"] as? String)
        #expect(try await Self.silent(stack, alice).status == 200)
        #expect(try await Self.silent(stack, carol).status == 200)
        let contosoKey = try #require(try await Self.dataKeyId(stack, tenant: Self.contoso))
        let fabrikamKey = try #require(try await Self.dataKeyId(stack, tenant: Self.fabrikam))
        // What a backup of the token table alone would hold of alice: her sealed refresh token.
        let backup = try #require(
            try await stack.withDatabase { connection in
                try connection.query("SELECT key_id, nonce, ciphertext FROM refresh_tokens WHERE account_id = $1", [.text(alice)]).rows.first.map {
                    ($0.string("key_id") ?? "", $0.bytes("nonce") ?? [], $0.bytes("ciphertext") ?? [])
                }
            })
        #expect(backup.0 == contosoKey)

        // Not without --yes: nothing happens.
        let refused = try await stack.runCommand(["tenants", "forget", Self.contoso])
        #expect(refused.status == 2)
        #expect(try await Self.dataKeyId(stack, tenant: Self.contoso) == contosoKey)
        #expect(try await Self.silent(stack, alice).status == 200)

        let (status, output) = try await stack.runCommand(["tenants", "forget", Self.contoso.uppercased(), "--yes"])
        #expect(status == 0, "\(output)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], "\(output)")
        #expect(report["tenant_id"] as? String == Self.contoso)
        #expect(report["accounts_deleted"] as? Int == 1)
        #expect(report["data_key_destroyed"] as? String == contosoKey)
        #expect(try await Self.dataKeyId(stack, tenant: Self.contoso) == nil)
        let audit = try await stack.withDatabase { connection in
            try connection.query("SELECT actor, outcome, detail->>'data_key_destroyed' AS key FROM audit_events WHERE action = 'tenant.forgotten'").rows
                .map { "\($0.string("actor") ?? "")/\($0.string("outcome") ?? "")/\($0.string("key") ?? "")" }
        }
        #expect(audit == ["cli/forgotten/\(contosoKey)"])

        // The service forgot alice (404), and fabrikam serves on.
        #expect(try await Self.silent(stack, alice).status == 404)
        let carolAgain = try await Self.silent(stack, carol, force: true)
        #expect(carolAgain.status == 200, "\(carolAgain.text)")

        // The dump holds nothing of the tenant that opens: no data key of it, no row under its
        // key, no token row of alice (events and the audit trail keep her id and the destroyed
        // key's id, never a secret).
        let dump = try await Self.dump(stack)
        let tokenTables = ["refresh_tokens", "access_tokens", "grant_access_tokens", "obo_refresh_tokens", "data_keys", "encryption_key_usage"]
        let tokenRows = Self.copySections(of: dump, tables: tokenTables)
        #expect(tokenRows.contains(carol) && tokenRows.contains(fabrikamKey), "no token rows found in the dump")
        #expect(!tokenRows.contains(contosoKey))
        #expect(!tokenRows.contains(alice))
        #expect(!tokenRows.contains(Self.contoso))

        // A row of the tenant restored from an older backup of the token tables does not open:
        // alice signs in again (a new data key), her old sealed refresh token is put back.
        let again = try await stack.signInAccountId("alice@contoso.example")
        let newKey = try #require(try await Self.dataKeyId(stack, tenant: Self.contoso))
        #expect(newKey != contosoKey)
        // The running service dropped the destroyed key from memory when the forget committed
        // (a replica notification): the new sign-in is sealed under the new key, not the old.
        let sealedUnder = try await stack.withDatabase { connection in
            try connection.query("SELECT key_id FROM refresh_tokens WHERE account_id = $1", [.text(again)]).rows.first?.string("key_id")
        }
        #expect(sealedUnder == newKey)
        try await stack.withDatabase { connection in
            try connection.query(
                "UPDATE refresh_tokens SET key_id = $2, nonce = $3, ciphertext = $4 WHERE account_id = $1",
                [.text(again), .text(backup.0), .bytes(backup.1), .bytes(backup.2)])
        }
        let stsCalls = try await stack.emulatorCount("token_requests")
        let restored = try await Self.silent(stack, again, force: true)
        #expect(restored.status == 500, "\(restored.text)")
        #expect(try await stack.emulatorCount("token_requests") == stsCalls)
        #expect(stack.relay.log().contains("data_key.missing"))
    }

    /// `TOKENRELAY_PKCS11_*` for a new SoftHSM2 token of its own (and `SOFTHSM2_CONF`).
    static func hsmEnvironment(keyLabel: String = "tokenrelay-kek") async throws -> [String: String] {
        let label = "relay-" + UUID().uuidString.prefix(8).lowercased()
        let pin = "pin-" + UUID().uuidString.prefix(8)
        try await SoftHSM.shared.initToken(label: label, pin: pin)
        return SoftHSM.shared.environment.merging([
            "TOKENRELAY_PKCS11_MODULE": SoftHSM.modulePath, "TOKENRELAY_PKCS11_TOKEN_LABEL": label, "TOKENRELAY_PKCS11_PIN": pin,
            "TOKENRELAY_PKCS11_KEY_LABEL": keyLabel,
        ]) { $1 }
    }

    /// The readiness check `encryption:kek` and the overall status.
    static func kekCheck(_ stack: TokenRelayStack) async throws -> (status: String?, check: [String: Any]) {
        let ready = try await stack.request("GET", "/readyz", authenticated: false)
        let check = try #require(((ready.json["checks"] as? [String: Any])?["encryption:kek"] as? [[String: Any]])?.first, "\(ready.text)")
        return (ready.json["status"] as? String, check)
    }

    @Test(
        "With the key-encryption key in SoftHSM2: data keys are wrapped in the token; when the HSM fails while running, cached tenants serve, a new tenant gets 503, readiness warns",
        .enabled(if: SoftHSM.isInstalled, "softhsm2 is not installed (scripts/install-deps)"))
    func keyEncryptionKeyInSoftHSM() async throws {
        let hsm = try await Self.hsmEnvironment()
        let created = try await BuiltProducts.run("token-relay", ["encryption", "create-kek"], environment: hsm.merging(["PATH": "/usr/bin:/bin"]) { $1 })
        #expect(created.status == 0, "\(created.error)")
        #expect(created.output.contains(#""created":true"#), "\(created.output)")
        let stack = try await TokenRelayStack(name: "e2e_hsm", environment: hsm)
        defer { stack.stop() }
        let alice = try await stack.signInAccountId("alice@contoso.example")
        #expect(try await Self.silent(stack, alice).status == 200)
        let kekId = try await stack.withDatabase { connection in
            try connection.query("SELECT kek_id FROM data_keys WHERE tenant_id = $1", [.text(Self.contoso)]).rows.first?.string("kek_id")
        }
        #expect(kekId == "pkcs11:tokenrelay-kek")
        let ready = try await Self.kekCheck(stack)
        #expect(ready.status == "pass")
        #expect(ready.check["componentId"] as? String == "pkcs11:tokenrelay-kek")
        #expect(ready.check["status"] as? String == "pass")

        // A restart unwraps contoso's data key in the token again; the refresh opens her token.
        try await stack.restartRelay(environment: [:])
        let refreshed = try await Self.silent(stack, alice, force: true)
        #expect(refreshed.status == 200, "\(refreshed.text)")

        // The HSM goes away while the service runs: the token is deleted under it.
        let delete = try await BuiltProducts.run(
            executableAt: "/usr/bin/softhsm2-util", ["--delete-token", "--token", hsm["TOKENRELAY_PKCS11_TOKEN_LABEL"] ?? ""],
            environment: SoftHSM.shared.environment)
        #expect(delete.status == 0, "\(delete.error)")
        // Contoso's data key is in memory: alice is still served, refresh included.
        let cached = try await Self.silent(stack, alice, force: true)
        #expect(cached.status == 200, "\(cached.text)")
        // A tenant never seen needs a new data key wrapped in the token: 503, with Retry-After.
        let carol = try await stack.adalRefreshToken(for: "carol@fabrikam.example")
        let imported = try await stack.request(
            "POST", "/v1/accounts/import",
            json: ["username": "carol@fabrikam.example", "refresh_token": carol, "authority": "\(stack.emulator.baseURL)/\(Self.fabrikam)"])
        #expect(imported.status == 503, "\(imported.text)")
        #expect(imported.json["error"] as? String == "upstream_unavailable")
        #expect(imported.headers["Retry-After"] != nil)
        #expect(!imported.text.contains(carol))
        let failing = try await Self.kekCheck(stack)
        #expect(failing.status == "warn")
        #expect(failing.check["status"] as? String == "warn")
        #expect((failing.check["output"] as? String ?? "").contains("new tenants get 503"), "\(failing.check)")
    }

    @Test(
        "The HSM unavailable, a wrong PIN, an unknown token or key label stop start-up with one line naming the setting, never the PIN",
        .enabled(if: SoftHSM.isInstalled, "softhsm2 is not installed (scripts/install-deps)"))
    func badHSMSettingsStopStartUp() async throws {
        let hsm = try await Self.hsmEnvironment()
        let pin = hsm["TOKENRELAY_PKCS11_PIN"] ?? ""
        var base = hsm.merging([
            "TOKENRELAY_LISTEN": "127.0.0.1:0", "TOKENRELAY_DATABASE_URL": try await TestPostgres.freshDatabase(named: "e2e_hsm_start"),
            "TOKENRELAY_CLIENT_ID": TokenRelayStack.clientId, "TOKENRELAY_AUTHORITY": "https://login.microsoftonline.com/common",
            "TOKENRELAY_ENCRYPTION_KEYS": "k1:" + EncryptionRotationTests.key(), "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin",
        ]) { $1 }
        // No key labelled so yet: create-kek makes it.
        let cases: [(change: [String: String], setting: String)] = [
            ([:], "TOKENRELAY_PKCS11_KEY_LABEL"),
            (["TOKENRELAY_PKCS11_MODULE": "/nonexistent/libpkcs11.so"], "TOKENRELAY_PKCS11_MODULE"),
            (["TOKENRELAY_PKCS11_TOKEN_LABEL": "no-such-token"], "TOKENRELAY_PKCS11_TOKEN_LABEL"),
            (["TOKENRELAY_PKCS11_PIN": "wrong-" + pin], "TOKENRELAY_PKCS11_PIN"),
            (["TOKENRELAY_PKCS11_PIN": ""], "TOKENRELAY_PKCS11_PIN"),
        ]
        for (change, setting) in cases {
            let environment = base.merging(change) { $1 }
            let run = try await BuiltProducts.run("token-relay", ["serve"], environment: environment)
            #expect(run.status == 2, "\(change): \(run.error)")
            let lines = run.error.split(separator: "\n")
            #expect(lines.count == 1, "\(change): \(run.error)")
            #expect(run.error.contains(setting), "\(change): \(run.error)")
            #expect(!run.error.contains(pin), "the PIN is in the error")
        }
        base["TOKENRELAY_PKCS11_KEY_LABEL"] = "tokenrelay-kek"
        #expect(try await BuiltProducts.run("token-relay", ["encryption", "create-kek"], environment: base).status == 0)
        let again = try await BuiltProducts.run("token-relay", ["encryption", "create-kek"], environment: base)
        #expect(again.output.contains(#""created":false"#), "\(again.output)")
    }
}
