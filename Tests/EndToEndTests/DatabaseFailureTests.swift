import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// What a caller sees and the log keeps when PostgreSQL fails a statement or cannot be reached
/// (behaviour §5.8).
@Suite("Database failures: the cause logged and never shown, an unreachable database 503", .serialized)
struct DatabaseFailureTests {
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
}
