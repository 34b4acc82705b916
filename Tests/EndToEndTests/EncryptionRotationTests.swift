import Foundation
import PostgresBridge
import Synchronization
import Testing
import TokenRelayTesting

/// Key rotation while the service serves, swapped ciphertexts, key usage, a key ring re-read on
/// SIGHUP (and the sign-in links its dropped keys signed) and a bad key ring (behaviour §7, §11,
/// §12 Encryption keys), on the built binaries.
@Suite("Encryption keys: rotation, row binding, usage, start-up", .serialized)
struct EncryptionRotationTests {
    static func key() -> String { Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString() }

    static func silent(_ stack: TokenRelayStack, _ id: String, force: Bool = false) async throws -> TestResponse {
        try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": force])
    }

    /// What still depends on a ring key other than `keyId` (ADR 0017): token rows not under a
    /// tenant's data key, pending sign-ins' verifiers not under `keyId`, data keys not wrapped by it.
    static func notUnder(_ keyId: String, in stack: TokenRelayStack) async throws -> Int {
        try await stack.withDatabase { connection in
            let sql = """
                SELECT (SELECT count(*) FROM refresh_tokens WHERE key_id NOT LIKE 'dk.%') + (SELECT count(*) FROM access_tokens WHERE key_id NOT LIKE 'dk.%')
                  + (SELECT count(*) FROM grant_access_tokens WHERE key_id NOT LIKE 'dk.%')
                  + (SELECT count(*) FROM sign_ins WHERE verifier_key_id <> $1)
                  + (SELECT count(*) FROM data_keys WHERE kek_id <> 'ring:' || $1) AS n
                """
            return Int(try connection.query(sql, [.text(keyId)]).rows.first?.int("n") ?? -1)
        }
    }

    /// Token rows sealed under a tenant's data key, and the number of data keys.
    static func envelopeCounts(in stack: TokenRelayStack) async throws -> (rows: Int, dataKeys: Int) {
        try await stack.withDatabase { connection in
            let row = try connection.query(
                """
                SELECT (SELECT count(*) FROM refresh_tokens WHERE key_id LIKE 'dk.%') + (SELECT count(*) FROM access_tokens WHERE key_id LIKE 'dk.%')
                  + (SELECT count(*) FROM grant_access_tokens WHERE key_id LIKE 'dk.%') AS rows, (SELECT count(*) FROM data_keys) AS keys
                """
            ).rows.first
            return (Int(row?.int("rows") ?? -1), Int(row?.int("keys") ?? -1))
        }
    }

    @Test("rotate rewraps every data key and re-encrypts every ring row under the new key while forced refreshes run; afterwards the old key can go")
    func rotationUnderLoad() async throws {
        let old = "old:" + Self.key()
        let new = "new:" + Self.key()
        // No grace: if the rotation ever wrote back a superseded refresh token, the next refresh fails.
        let stack = try await TokenRelayStack(
            name: "e2e_rotate", environment: ["TOKENRELAY_ENCRYPTION_KEYS": old], emulatorArguments: ["--rotation-grace-seconds", "0"])
        defer { stack.stop() }
        let ids = [try await stack.signInAccountId("alice@contoso.example"), try await stack.signInAccountId("bob@contoso.example")]
        // More cached access tokens (one row per scope set), and a sign-in left pending: its PKCE
        // verifier is a ciphertext too.
        for id in ids {
            for scope in ["Mail.Read", "Files.Read", "Calendars.Read"] {
                let answer = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": [scope]])
                #expect(answer.status == 200, "\(answer.text)")
            }
        }
        #expect(try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"]]).status == 201)
        // The service's own app token is stored encrypted too.
        let appToken = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": ["https://graph.microsoft.com/.default"]])
        #expect(appToken.status == 200, "\(appToken.text)")
        // Every token row is under its tenant's data key (ADR 0017); what the old key holds is
        // the data keys (wrapped) and the pending sign-in's verifier.
        let (rows, dataKeys) = try await Self.envelopeCounts(in: stack)
        #expect(rows == 2 + 8 + 1)
        #expect(dataKeys >= 1)
        #expect(try await Self.notUnder("new", in: stack) == dataKeys + 1)

        try await stack.restartRelay(environment: ["TOKENRELAY_ENCRYPTION_KEYS": "\(new),\(old)"])
        let running = Flag()
        let outcomes = Tally()
        let load = Task {
            await withTaskGroup(of: Void.self) { group in
                for id in ids {
                    group.addTask {
                        while running.isSet {
                            outcomes.add((try? await Self.silent(stack, id, force: true))?.status ?? -1)
                        }
                    }
                }
            }
        }
        // Let refreshes start before the rotation, so the two really overlap.
        while outcomes.total < 4 { try await Task.sleep(for: .milliseconds(20)) }
        let (status, output) = try await stack.runCommand(["encryption", "rotate", "--batch-size", "1"])
        // A few more refreshes after the rotation, then stop.
        let seen = outcomes.total
        while outcomes.total < seen + 4 { try await Task.sleep(for: .milliseconds(20)) }
        running.clear()
        await load.value

        #expect(status == 0, "\(output)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], "\(output)")
        #expect(report["key_id"] as? String == "new")
        #expect(report["rows_remaining"] as? Int == 0)
        #expect(report["rows_failed"] as? Int == 0)
        #expect(report["rows_reencrypted"] as? Int == 1)
        #expect(((report["tables"] as? [String: Any])?["sign_ins"] as? [String: Any])?["reencrypted"] as? Int == 1)
        #expect(report["data_keys_rewrapped"] as? Int == dataKeys)
        #expect(report["data_keys_remaining"] as? Int == 0)
        #expect(outcomes.counts.keys.sorted() == [200], "silent answers during the rotation: \(outcomes.counts)")
        #expect(try await Self.notUnder("new", in: stack) == 0)
        // The rows were not touched: still under the same data keys.
        #expect(try await Self.envelopeCounts(in: stack).rows == rows)
        // No superseded refresh token was ever presented (the emulator allows no grace here).
        let chains = try await stack.control("GET", "/_control/stats").json["refresh_token_chain"] as? [String: [String: Int]] ?? [:]
        #expect(chains.count == 2 && chains.values.allSatisfy { $0["rejected_superseded"] == 0 && $0["redeemed"]! > 0 }, "\(chains)")
        let audit = try await stack.withDatabase { connection in
            try connection.query("SELECT outcome, detail->>'rows_remaining' AS remaining FROM audit_events WHERE action = 'encryption.rotated'").rows
                .map { "\($0.string("outcome") ?? "")/\($0.string("remaining") ?? "")" }
        }
        #expect(audit == ["success/0"])

        // The old key is no longer needed: every account still yields tokens, from the cache and
        // by redeeming its (re-encrypted) refresh token.
        try await stack.restartRelay(environment: ["TOKENRELAY_ENCRYPTION_KEYS": new])
        for id in ids {
            let cached = try await Self.silent(stack, id)
            #expect(cached.status == 200, "\(cached.text)")
            #expect(cached.json["source"] as? String == "cache")
            let refreshed = try await Self.silent(stack, id, force: true)
            #expect(refreshed.status == 200, "\(refreshed.text)")
            #expect(refreshed.json["source"] as? String == "refresh")
        }
        // The app token row opens under the new key alone: served from the shared cache, no STS call.
        let stsCalls = try await stack.emulatorCount()
        let cachedApp = try await stack.request("POST", "/v1/tokens/app", json: ["scopes": ["https://graph.microsoft.com/.default"]])
        #expect(cachedApp.json["source"] as? String == "cache", "\(cachedApp.text)")
        #expect(try await stack.emulatorCount() == stsCalls)
        // A second run finds nothing to do.
        let again = try await stack.runCommand(["encryption", "rotate"])
        #expect(again.status == 0)
        #expect(again.output.contains(#""rows_reencrypted":0"#), "\(again.output)")
        #expect(again.output.contains(#""data_keys_rewrapped":0"#), "\(again.output)")
    }

    @Test("A ciphertext copied into another account's row does not open: a problem and a log line, never the token")
    func swappedCiphertextIsRefused() async throws {
        let stack = try await TokenRelayStack(name: "e2e_swap")
        defer { stack.stop() }
        let alice = try await stack.signInAccountId("alice@contoso.example")
        let bob = try await stack.signInAccountId("bob@contoso.example")
        let bobsToken = try #require(try await Self.silent(stack, bob).json["access_token"] as? String)
        try await stack.withDatabase { connection in
            for table in ["refresh_tokens", "access_tokens"] {
                try connection.query(
                    """
                    UPDATE \(table) AS a SET key_id = b.key_id, nonce = b.nonce, ciphertext = b.ciphertext
                    FROM \(table) AS b WHERE a.account_id = $1 AND b.account_id = $2
                    """, [.text(alice), .text(bob)])
            }
        }
        let before = try await stack.emulatorCount("token_requests")
        for force in [false, true] {
            let answer = try await Self.silent(stack, alice, force: force)
            #expect(answer.status == 500, "\(answer.text)")
            #expect(answer.json["error"] as? String == "internal")
            #expect(!answer.text.contains(bobsToken))
        }
        // The copied refresh token was never sent to the identity provider.
        #expect(try await stack.emulatorCount("token_requests") == before)
        // Bob's own rows still work.
        #expect(try await Self.silent(stack, bob, force: true).status == 200)

        let log = stack.relay.log()
        #expect(log.contains("token.decrypt_failed"))
        #expect(log.contains(alice))
        let issued = try await stack.issuedSecrets()
        #expect(!issued.refreshTokens.isEmpty)
        for secret in issued.refreshTokens + issued.accessTokens + issued.idTokens where log.contains(secret) {
            Issue.record("the service log holds a token the emulator issued")
        }

        // A rotation rewraps data keys and leaves rows under them untouched: the moved row stays
        // refused afterwards.
        let newRing = "new:\(Self.key()),\(stack.relayEnvironment["TOKENRELAY_ENCRYPTION_KEYS"] ?? "")"
        let rotated = try await stack.runCommand(["encryption", "rotate"], environment: ["TOKENRELAY_ENCRYPTION_KEYS": newRing])
        #expect(rotated.status == 0, "\(rotated.output)")
        try await stack.restartRelay(environment: ["TOKENRELAY_ENCRYPTION_KEYS": newRing])
        #expect(try await Self.silent(stack, alice).status == 500)
        #expect(try await Self.silent(stack, bob).status == 200)

        // A row under a key the ring no longer has: rotate reports it and leaves it; the exit
        // status says the work is incomplete.
        try await stack.withDatabase { connection in
            try connection.query("UPDATE access_tokens SET key_id = 'gone' WHERE account_id = $1", [.text(alice)])
        }
        let (status, output) = try await stack.runCommand(["encryption", "rotate"], environment: ["TOKENRELAY_ENCRYPTION_KEYS": newRing])
        #expect(status == 1)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], "\(output)")
        #expect(report["rows_failed"] as? Int == 1)
        #expect(report["rows_remaining"] as? Int == 1)
        #expect(report["data_keys_remaining"] as? Int == 0)
    }

    @Test("Readiness counts encryptions per key and warns past 2^31; it names the key-encryption key and the data keys still under an older one")
    func usageWarning() async throws {
        let k1 = "k1:" + Self.key()
        let stack = try await TokenRelayStack(name: "e2e_keyuse", environment: ["TOKENRELAY_ENCRYPTION_KEYS": k1])
        defer { stack.stop() }
        _ = try await stack.signInAccountId("alice@contoso.example")
        func readiness() async throws -> (status: String?, keys: [String: Any], kek: [String: Any]) {
            let ready = try await stack.request("GET", "/readyz", authenticated: false)
            #expect(ready.status == 200)
            let checks = ready.json["checks"] as? [String: Any]
            return (
                ready.json["status"] as? String, try #require((checks?["encryption:keys"] as? [[String: Any]])?.first),
                try #require((checks?["encryption:kek"] as? [[String: Any]])?.first)
            )
        }
        let ready = try await readiness()
        #expect(ready.status == "pass")
        // The sign-in sealed the refresh and access tokens under the tenant's data key (the most
        // used key) and the PKCE verifier under k1.
        #expect((ready.keys["componentId"] as? String ?? "").hasPrefix("dk."), "\(ready.keys)")
        #expect(ready.keys["observedValue"] as? Int == 2)
        #expect(ready.kek["componentId"] as? String == "ring:k1")
        #expect(ready.kek["observedValue"] as? Int == 0)
        #expect(ready.kek["status"] as? String == "pass")

        // Readiness writes nothing (issue 28): the counts reach the table every flush interval,
        // so the row may not exist yet.
        try await stack.withDatabase { connection in
            try connection.query(
                """
                INSERT INTO encryption_key_usage (key_id, encryptions) VALUES ('k1', 2147483649)
                ON CONFLICT (key_id) DO UPDATE SET encryptions = EXCLUDED.encryptions
                """)
        }
        let warned = try await readiness()
        #expect(warned.status == "warn")
        #expect(warned.keys["componentId"] as? String == "k1")
        #expect(warned.keys["status"] as? String == "warn")
        #expect((warned.keys["output"] as? String ?? "").contains("token-relay encryption rotate"))

        // A new first key: the tenant's data key is still wrapped by k1 until `rewrap`.
        let ring = "k2:\(Self.key()),\(k1)"
        try await stack.restartRelay(environment: ["TOKENRELAY_ENCRYPTION_KEYS": ring])
        let pending = try await readiness()
        #expect(pending.kek["componentId"] as? String == "ring:k2")
        #expect(pending.kek["observedValue"] as? Int == 1)
        #expect(pending.kek["status"] as? String == "warn")
        #expect((pending.kek["output"] as? String ?? "").contains("token-relay encryption rewrap"))
        let rewrap = try await stack.runCommand(["encryption", "rewrap"], environment: ["TOKENRELAY_ENCRYPTION_KEYS": ring])
        #expect(rewrap.status == 0, "\(rewrap.output)")
        #expect(rewrap.output.contains(#""data_keys_rewrapped":1"#), "\(rewrap.output)")
        let done = try await readiness()
        #expect(done.kek["observedValue"] as? Int == 0)
        #expect(done.kek["status"] as? String == "pass")
    }

    @Test("SIGHUP re-reads the key ring from TOKENRELAY_ENCRYPTION_KEYS_FILE; a bad ring is logged and the old one kept")
    func hangupReloadsKeyRing() async throws {
        let file = TestLogs.directory + "/keyring-\(UUID().uuidString).txt"
        defer { try? FileManager.default.removeItem(atPath: file) }
        let first = "k1:" + Self.key()
        try Data(first.utf8).write(to: URL(fileURLWithPath: file))
        let stack = try await TokenRelayStack(
            name: "e2e_sighup", environment: ["TOKENRELAY_ENCRYPTION_KEYS": "", "TOKENRELAY_ENCRYPTION_KEYS_FILE": file])
        defer { stack.stop() }
        let alice = try await stack.signInAccountId("alice@contoso.example")
        // Rows go under the tenant's data key; the ring's first key seals what has no tenant
        // yet (a pending sign-in's verifier) and wraps new data keys.
        func newSignInKeyId() async throws -> String? {
            #expect(try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"]]).status == 201)
            return try await stack.withDatabase { connection in
                try connection.query("SELECT verifier_key_id FROM sign_ins ORDER BY created_at DESC LIMIT 1").rows.first?.string("verifier_key_id")
            }
        }
        #expect(try await newSignInKeyId() == "k1")
        func hangup(expecting event: String) async throws {
            let seen = stack.relay.log().components(separatedBy: event).count
            stack.relay.send(signal: SIGHUP)
            for _ in 0..<100 where stack.relay.log().components(separatedBy: event).count == seen {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(stack.relay.log().components(separatedBy: event).count == seen + 1, "no \(event) after SIGHUP")
        }

        try Data("k2:\(Self.key()),\(first)".utf8).write(to: URL(fileURLWithPath: file))
        try await hangup(expecting: "encryption.key_ring_reloaded")
        #expect(try await Self.silent(stack, alice, force: true).status == 200)
        #expect(try await newSignInKeyId() == "k2")

        try Data("k3:not-a-key".utf8).write(to: URL(fileURLWithPath: file))
        try await hangup(expecting: "encryption.key_ring_reload_failed")
        #expect(try await Self.silent(stack, alice, force: true).status == 200)
        #expect(try await newSignInKeyId() == "k2")
    }

    @Test("After SIGHUP drops a key from the ring, sign-in links signed with it are refused and new links use the new key")
    func hangupRetiresLinkKeys() async throws {
        let file = TestLogs.directory + "/keyring-\(UUID().uuidString).txt"
        defer { try? FileManager.default.removeItem(atPath: file) }
        try Data("k1:\(EncryptionRotationTests.key())".utf8).write(to: URL(fileURLWithPath: file))
        let stack = try await TokenRelayStack(
            name: "e2e_sighup_links", environment: ["TOKENRELAY_ENCRYPTION_KEYS": "", "TOKENRELAY_ENCRYPTION_KEYS_FILE": file])
        defer { stack.stop() }
        let id = try await stack.signInAccountId()
        _ = try await stack.control("POST", "/_control/users/alice@contoso.example", json: ["revoke_refresh_tokens": true])
        let refused = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(refused.json["account_state"] as? String == "interaction_required", "\(refused.text)")
        let oldLink = try #require(refused.json["sign_in_url"] as? String)

        try Data("k2:\(EncryptionRotationTests.key())".utf8).write(to: URL(fileURLWithPath: file))
        let seen = stack.relay.log().components(separatedBy: "encryption.key_ring_reloaded").count
        stack.relay.send(signal: SIGHUP)
        for _ in 0..<100 where stack.relay.log().components(separatedBy: "encryption.key_ring_reloaded").count == seen {
            try await Task.sleep(for: .milliseconds(50))
        }
        let old = try await stack.request("GET", oldLink, authenticated: false)
        #expect(old.status == 403, "\(old.text)")
        #expect(old.json["field"] as? String == "sig")
        let again = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"]])
        let newLink = try #require(again.json["sign_in_url"] as? String)
        #expect(try await stack.request("GET", newLink, authenticated: false).status == 302)
    }

    /// Runs the built `token-relay` and returns its exit status and standard error.
    static func runCapturingErrors(_ arguments: [String], environment: [String: String]) async throws -> (Int32, String) {
        let run = try await BuiltProducts.run("token-relay", arguments, environment: environment)
        return (run.status, run.error)
    }

    @Test(
        "A missing or malformed key ring stops start-up with one line naming the setting",
        arguments: ["", "k1", "k1:c2hvcnQ=", "k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=,k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="])
    func badKeyRingStopsStartUp(ring: String) async throws {
        var environment = [
            "TOKENRELAY_LISTEN": "127.0.0.1:0", "TOKENRELAY_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
            "TOKENRELAY_CLIENT_ID": TokenRelayStack.clientId, "TOKENRELAY_AUTHORITY": "https://login.microsoftonline.com/common",
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin",
        ]
        environment["TOKENRELAY_ENCRYPTION_KEYS"] = ring
        for command in ["serve", "check-config"] {
            let (status, errors) = try await Self.runCapturingErrors([command], environment: environment)
            #expect(status == 2)
            let lines = errors.split(separator: "\n")
            #expect(lines.count == 1, "\(errors)")
            #expect(errors.contains("TOKENRELAY_ENCRYPTION_KEYS"))
            for entry in ring.split(separator: ",") {
                if let colon = entry.firstIndex(of: ":"), entry.count > 20 { #expect(!errors.contains(entry[entry.index(after: colon)...])) }
            }
        }
    }
}

/// A flag the load tasks poll.
private final class Flag: Sendable {
    private let value = Mutex(true)
    var isSet: Bool { value.withLock { $0 } }
    func clear() { value.withLock { $0 = false } }
}

/// HTTP statuses seen by the load tasks.
private final class Tally: Sendable {
    private let value = Mutex<[Int: Int]>([:])
    func add(_ status: Int) { value.withLock { $0[status, default: 0] += 1 } }
    var counts: [Int: Int] { value.withLock { $0 } }
    var total: Int { counts.values.reduce(0, +) }
}
