import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// A sign-in racing an import's first redemption for the same user (behaviour §3 import, §12
/// Accounts; issue 10 item 10): whichever stores the user's `home_account_id` first, the other
/// merges into it; never the unique index's 500.
///
/// The race is made certain rather than likely: the emulator delays the import's redemption,
/// and a trigger in the test's database keeps the first writer's transaction open (a
/// `pg_sleep` at its audit row, after its account row is written) while the second one runs.
@Suite("A sign-in racing an import's first redemption", .serialized)
struct ImportSignInRaceTests {
    /// Holds every transaction that writes an audit row `action` open for `seconds`.
    static func slowDown(_ stack: TokenRelayStack, action: String, seconds: Double) async throws {
        try await stack.withDatabase { connection in
            try connection.execute(
                """
                CREATE OR REPLACE FUNCTION test_slow_audit() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN PERFORM pg_sleep(\(seconds)); RETURN NEW; END $$;
                DROP TRIGGER IF EXISTS test_slow_audit ON audit_events;
                CREATE TRIGGER test_slow_audit BEFORE INSERT ON audit_events FOR EACH ROW
                  WHEN (NEW.action = '\(action)') EXECUTE FUNCTION test_slow_audit();
                """)
        }
    }

    /// The emulator's count of refresh-token redemptions for `username` (recorded on arrival,
    /// before any injected latency).
    static func refreshRedemptions(_ stack: TokenRelayStack, _ username: String) async throws -> Int {
        let requests = try await stack.control("GET", "/_control/token-requests").json["requests"] as? [[String: Any]] ?? []
        return requests.filter { $0["grant_type"] as? String == "refresh_token" && $0["username"] as? String == username }.count
    }

    /// Waits, up to 20 s, until `condition` holds; a fixed sleep made these races depend on the
    /// machine's load (on two busy cores the import reached its step late and the race went the
    /// other way).
    static func waitUntil(_ what: String, _ condition: () async throws -> Bool) async throws {
        guard try await eventually(within: 20, condition) else { throw TestFailure("waited 20 s for \(what)") }
    }

    /// Whether a transaction is held in `test_slow_audit`'s `pg_sleep`.
    static func auditHeld(_ stack: TokenRelayStack) async throws -> Bool {
        try await stack.withDatabase { connection in
            try connection.query("SELECT count(*)::int AS held FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()").rows.first?
                .int("held") ?? 0
        } > 0
    }

    /// Imports `username`'s ADAL refresh token; returns the imported account id.
    static func importAccount(_ stack: TokenRelayStack, _ username: String) async throws -> String {
        let adal = try await stack.adalRefreshToken(for: username)
        let imported = try await stack.request(
            "POST", "/v1/accounts/import",
            json: ["username": username, "refresh_token": adal, "authority": "\(stack.emulator.baseURL)/\(stack.tenantId)"])
        #expect(imported.status == 201, "\(imported.text)")
        return try #require(imported.json["account_id"] as? String)
    }

    /// The accounts stored for `username` and where `importedId` resolves to now.
    static func outcome(_ stack: TokenRelayStack, _ username: String, importedId: String) async throws -> (accounts: [String], resolved: String?) {
        let accounts = try await stack.withDatabase { connection in
            try connection.query("SELECT account_id FROM accounts WHERE lower(username) = lower($1)", [.text(username)]).rows.compactMap {
                $0.string("account_id")
            }
        }
        let fetched = try await stack.request("GET", "/v1/accounts/\(importedId)")
        return (accounts, fetched.json["account_id"] as? String)
    }

    @Test("A sign-in whose account row is written while the import's redemption is at the STS: the import merges into it")
    func signInCommitsDuringImportCompletion() async throws {
        let stack = try await TokenRelayStack(name: "e2e_import_race_signin")
        defer { stack.stop() }
        let user = "alice@contoso.example"
        let importedId = try await Self.importAccount(stack, user)
        // The import's redemption takes 1.5 s at the STS; the sign-in's transaction stays open
        // 3 s after it wrote the account, so the import's completion runs inside that window.
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "username": user, "latency_ms": 1500, "count": 1])
        try await Self.slowDown(stack, action: "sign_in.completed", seconds: 3)

        let redeemed = try await Self.refreshRedemptions(stack, user)
        async let silent = stack.request("POST", "/v1/tokens/silent", json: ["account_id": importedId, "scopes": ["User.Read"]])
        // The import's redemption reaches the STS (and takes the slow fault) before the sign-in starts.
        try await Self.waitUntil("the import's redemption at the STS") { try await Self.refreshRedemptions(stack, user) > redeemed }
        let signedIn = try await stack.signIn(user)
        let answer = try await silent

        #expect(answer.status == 200, "\(answer.text)")
        let survivor = try #require((signedIn["account"] as? [String: Any])?["account_id"] as? String)
        #expect((answer.json["account"] as? [String: Any])?["account_id"] as? String == survivor)
        let (accounts, resolved) = try await Self.outcome(stack, user, importedId: importedId)
        #expect(accounts == [survivor])
        #expect(resolved == survivor)
        let again = try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": importedId, "scopes": ["User.Read"]])
        #expect(again.status == 200, "\(again.text)")
    }

    @Test("An import that identifies its account while a sign-in of the same user completes: the sign-in merges into it")
    func importCommitsDuringSignIn() async throws {
        let stack = try await TokenRelayStack(name: "e2e_import_race_import")
        defer { stack.stop() }
        let user = "bob@contoso.example"
        let importedId = try await Self.importAccount(stack, user)
        // The import's transaction stays open 3 s after it set home_account_id; the sign-in
        // (its code redemption slowed 1 s) completes inside that window.
        try await Self.slowDown(stack, action: "account.import_completed", seconds: 3)

        async let silent = stack.request("POST", "/v1/tokens/silent", json: ["account_id": importedId, "scopes": ["User.Read"]])
        try await Self.waitUntil("the import's transaction held at its audit row") { try await Self.auditHeld(stack) }
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "username": user, "latency_ms": 1000, "count": 1])
        let signedIn = try await stack.signIn(user)
        let answer = try await silent

        #expect(answer.status == 200, "\(answer.text)")
        let account = try #require((signedIn["account"] as? [String: Any])?["account_id"] as? String)
        #expect(account == importedId)
        let (accounts, resolved) = try await Self.outcome(stack, user, importedId: importedId)
        #expect(accounts == [importedId])
        #expect(resolved == importedId)
    }
}
