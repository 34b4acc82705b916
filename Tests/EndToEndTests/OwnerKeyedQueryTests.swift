import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// Every statement the service runs on a token table names the row's owner (behaviour §12
/// Memories and replicas: `account_id` for user tokens, `owner` — `app:{tenant}` /
/// `obo:{sha256(assertion)}` — for app and OBO tokens), so that with the token tables
/// distributed by that column (Citus, docs/failover.md) each is routed to one shard. Read from
/// `pg_stat_statements` (track = all, so the statements inside the refresh functions of
/// migrations/0010 count too) after a workload that touches every token path.
@Suite("Token queries keyed by their owner (pg_stat_statements)", .serialized, .timingGroup(.heavy))
struct OwnerKeyedQueryTests {
    /// The token tables (migrations/) and the owner column each is distributed by.
    static let ownerColumn: [String: String] = [
        "access_tokens": "account_id",
        "refresh_tokens": "account_id",  // also the refresh leases (lease_owner, lease_expires_at)
        "refresh_token_lineage": "account_id",
        "grant_access_tokens": "owner",
        "obo_refresh_tokens": "owner",
    ]

    /// Statements that are multi-shard on purpose: each visits many owners by its nature, runs
    /// in the background (never on a caller's request), and Citus runs it in parallel on every
    /// shard. Each is a regular expression over the normalised (lower-case, single-spaced) statement;
    /// pg_stat_statements keeps a statement's constants as sent when it stored the text without
    /// replacing them (seen once for the health gauge: `select 1`, `'none'`), so a pattern takes both.
    static let multiShard: [(pattern: String, why: String)] = [
        // Keep-alive selection: "which refresh tokens have been idle for N days" is a question
        // about all accounts; one pass per interval, by one replica (job lease), on the index
        // (client_id, updated_at) of every shard.
        (
            #"^select a\.account_id from refresh_tokens r join accounts a on a\.account_id = r\.account_id where r\.client_id = \$1 and a\.state = ('active'|\$[0-9]+) and r\.updated_at < "#,
            "keep-alive selection"
        ),
        // Key rotation walk: `encryption rotate` visits every row not under the ring's first
        // key (or, for tables sealed under tenants' data keys, every row under a ring key), in
        // batches of short transactions, by primary key (the owner column first).
        (
            #"^select ctid::text as row_ref, .* from [a-z_]+ where (key_id <> \$1|key_id not like \$[0-9]+ and \$1::text is not null) (and \([a-z_, ]+\) > \(.*\) )?and \$2::text is not null order by [a-z_, ]+ limit \$[0-9]+ for update skip locked$"#,
            "key rotation walk"
        ),
        // Key rotation's batch update: one statement for the batch's rows, many owners, each row
        // still pinned by its owner and ctid (Citus runs it on the shards of those owners).
        (
            #"^update [a-z_]+ as t set key_id = v\.key_id, .* from unnest\(.*\) as v\(row_ref, owner, .*\) where t\.[a-z_]+ = v\.owner and t\.ctid = v\.row_ref::tid "#,
            "key rotation batch update"
        ),
        // Key rotation progress: rows left under an old key, counted over every shard.
        (#"^select count\(\*\) as n from [a-z_]+ where (key_id <> \$1|key_id not like \$2 and \$1::text is not null)$"#, "key rotation progress count"),
        // Account health gauge (issue 28 part 4): accounts counted by state and current failure
        // class, one statement per interval; each account's refresh token is read by its own
        // account_id (a co-located join on the owner column).
        (
            #"^select a\.state, case when \(a\.last_failure_at is not null and not exists \(select (\$[0-9]+|1) from refresh_tokens fr where fr\.account_id = a\.account_id "#,
            "account health gauge"
        ),
        // Account listing (`GET /v1/accounts`, an operator's page of accounts, not a token
        // request): the `failure_class` filter reads each listed account's refresh token by its
        // own account_id (a co-located join on the owner column).
        (
            #"^select account_id, client_id, .* from accounts where accounts\.client_id = \$1 .*not exists \(select (\$[0-9]+|1) from refresh_tokens fr where fr\.account_id = accounts\.account_id "#,
            "account listing by failure class"
        ),
        // Retention: app/OBO tokens whose assertion expired, deleted in the background.
        (#"^delete from (grant_access_tokens|obo_refresh_tokens) where owner_expires_on < \$1$"#, "OBO token retention"),
    ]

    @Test("a workload of every token path runs only owner-keyed statements on token tables, apart from the commented multi-shard ones")
    func everyTokenQueryIsKeyedByItsOwner() async throws {
        try await StatementStatistics.withServer { statistics in
            let stack = try await TokenRelayStack(name: "e2e_owner_keyed", databaseURL: statistics.postgres.url)
            defer { stack.stop() }
            // Migrations ran at start: only the workload from here on.
            try await statistics.reset()
            try await workload(stack, admin: statistics.admin)
            try await check(try await statistics.serviceStatements())
        }
    }

    private func check(_ statements: [(query: String, calls: Int64)]) async throws {
        var touched: Set<String> = []
        var unkeyed: [String] = []
        var allowed: [String: Int] = [:]
        var keyed = 0
        for (query, _) in statements {
            let sql = Self.normalised(query)
            let tables = Self.ownerColumn.keys.filter { Self.mentions(sql, $0) }
            guard !tables.isEmpty else { continue }
            touched.formUnion(tables)
            if tables.allSatisfy({ Self.isKeyed(sql, table: $0) }) {
                keyed += 1
            } else if let exception = Self.multiShard.first(where: { sql.range(of: $0.pattern, options: .regularExpression) != nil }) {
                allowed[exception.why, default: 0] += 1
            } else {
                unkeyed.append(sql)
            }
        }
        print("owner-keyed: \(statements.count) statements, \(keyed) on token tables keyed by the owner, multi-shard by design: \(allowed)")
        for sql in unkeyed { print("owner-keyed: NOT KEYED: \(sql)") }
        #expect(unkeyed.isEmpty, "statements on token tables not keyed by the owner column: \(unkeyed)")
        // The workload reached every token table (else the check proves nothing for it).
        #expect(touched == Set(Self.ownerColumn.keys), "untouched token tables: \(Set(Self.ownerColumn.keys).subtracting(touched))")
        // track = all: the statements inside the refresh functions (migrations/0010) were seen.
        #expect(statements.contains { $0.0.contains("p_account") }, "no statement from inside tokenrelay_claim_refresh / tokenrelay_store_rotation")
        #expect(keyed >= 15, "too few keyed token statements seen (\(keyed)): the workload did not run")
    }

    /// Sign-in, silent (cached, forced refresh, from PostgreSQL after a restart), downstream as
    /// account, app and OBO, app and OBO tokens, import (merging into a signed-in account),
    /// lookups, a keep-alive pass, events, key rotation, delete.
    private func workload(_ stack: TokenRelayStack, admin: PostgresPool) async throws {
        func expectStatus(_ answer: TestResponse, _ status: Int, _ what: String) {
            #expect(answer.status == status, "\(what): \(answer.status) \(answer.status == 200 ? "" : answer.text)")
        }
        let assertion = try await AppAndOnBehalfOfTests.incomingUserToken(stack)
        let alice = try await stack.signInAccountId("alice@contoso.example")
        let bob = try await stack.signInAccountId("bob@contoso.example")
        for force in [false, false, true] {
            expectStatus(
                try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": bob, "scopes": ["User.Read"], "force_refresh": force]), 200,
                "silent force=\(force)")
        }
        expectStatus(try await stack.request("POST", "/v1/tokens/app", json: ["scopes": ["https://graph.microsoft.com/.default"]]), 200, "app")
        for scope in ["User.Read", "Mail.Read"] {
            expectStatus(
                try await stack.request("POST", "/v1/tokens/on-behalf-of", json: ["assertion": assertion, "scopes": [scope]]), 200, "obo \(scope)")
        }
        expectStatus(try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": alice]), 200, "downstream as account")
        expectStatus(
            try await stack.request("GET", "/v1/downstream/graph/users/bob@contoso.example", headers: ["X-App-Only": "true"]), 200, "downstream as app")
        expectStatus(
            try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-On-Behalf-Of-Assertion": assertion]), 200, "downstream on behalf")
        // Import: a new account, and one merging into the signed-in bob.
        for user in ["erin@contoso.example", "bob@contoso.example"] {
            let adal = try await stack.adalRefreshToken(for: user)
            let imported = try await stack.request(
                "POST", "/v1/accounts/import",
                json: ["username": user, "refresh_token": adal, "authority": "\(stack.emulator.baseURL)/\(stack.tenantId)"])
            #expect([200, 201].contains(imported.status), "import \(user): \(imported.text)")
        }
        expectStatus(try await stack.request("GET", "/v1/accounts/\(alice)"), 200, "account")
        expectStatus(try await stack.request("GET", "/v1/accounts?username=alice@contoso.example"), 200, "lookup")
        // A restart empties memory: the next silent request reads the stored access token.
        try await stack.restartRelay(environment: [:])
        expectStatus(try await stack.request("POST", "/v1/tokens/silent", json: ["account_id": bob, "scopes": ["User.Read"]]), 200, "silent after restart")
        // Keep-alive: alice's refresh token idle for 80 days (aged by the superuser, not the service).
        try await admin.withConnection { connection in
            _ = try connection.query("UPDATE refresh_tokens SET updated_at = now() - interval '80 days' WHERE account_id = $1", [.text(alice)])
        }
        let keepAlive = try await stack.runCommand(["keepalive", "--once"])
        #expect(keepAlive.status == 0, "keepalive --once: \(keepAlive.output)")
        expectStatus(try await stack.request("GET", "/v1/events"), 200, "events")
        // Key rotation to a new first key.
        let ring =
            "new:\(Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()),\(stack.relayEnvironment["TOKENRELAY_ENCRYPTION_KEYS"] ?? "")"
        let rotation = try await stack.runCommand(["encryption", "rotate"], environment: ["TOKENRELAY_ENCRYPTION_KEYS": ring])
        #expect(rotation.status == 0, "encryption rotate: \(rotation.output)")
        expectStatus(try await stack.request("DELETE", "/v1/accounts/\(bob)"), 204, "delete")
    }

    // MARK: The check

    /// Lower case, runs of white space as one space.
    static func normalised(_ query: String) -> String {
        query.lowercased().split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    /// Whether `sql` names `table` as a table (not as the prefix of another name).
    static func mentions(_ sql: String, _ table: String) -> Bool {
        sql.range(of: #"(^|[^a-z0-9_])"# + table + #"($|[^a-z0-9_])"#, options: .regularExpression) != nil
    }

    /// Whether `sql` pins `table`'s owner column to a value: `col = $n` (or a PL/pgSQL
    /// parameter `p_…`), `col = ANY($n)`, `col IN (…)`, the foreign-key cascade's
    /// `$1 OPERATOR(pg_catalog.=) "col"` (a DELETE of an account), or an INSERT naming the
    /// column (its VALUES then carry the owner).
    static func isKeyed(_ sql: String, table: String) -> Bool {
        guard let column = ownerColumn[table] else { return false }
        let predicate = #"(^|[^a-z0-9_])([a-z_]+\.)?"# + column + #"\s*(=\s*(\$[0-9]+|p_[a-z_]+)($|[^a-z0-9_])|=\s*any\s*\(|in\s*\()"#
        if sql.range(of: predicate, options: .regularExpression) != nil { return true }
        let cascade = #"\$[0-9]+ operator\(pg_catalog\.=\) "?"# + column + #""?($|[^a-z0-9_])"#
        if sql.range(of: cascade, options: .regularExpression) != nil { return true }
        let insert = "insert into " + table + #"\s*\(([^)]*[^a-z0-9_])?"# + column + #"($|[^a-z0-9_])"#
        return sql.range(of: insert, options: .regularExpression) != nil
    }

    @Test("the check itself: keyed and unkeyed statements are told apart")
    func checkTellsKeyedFromUnkeyed() {
        let keyed = [
            ("select key_id from refresh_tokens where account_id = $1 and client_id = $2", "refresh_tokens"),
            ("delete from access_tokens a where a.account_id = p_account and a.realm = p_realm", "access_tokens"),
            ("insert into grant_access_tokens (owner, environment) values ($1, $2)", "grant_access_tokens"),
            ("delete from obo_refresh_tokens where owner = any($1)", "obo_refresh_tokens"),
            (#"delete from only "public"."refresh_tokens" where $1 operator(pg_catalog.=) "account_id""#, "refresh_tokens"),
        ]
        for (sql, table) in keyed { #expect(Self.isKeyed(sql, table: table), "\(sql)") }
        let unkeyed = [
            ("update refresh_tokens set key_id = $1 where ctid = $4::tid", "refresh_tokens"),
            ("select a.account_id from refresh_tokens r join accounts a on a.account_id = r.account_id where r.client_id = $1", "refresh_tokens"),
            ("delete from grant_access_tokens where owner_expires_on < $1", "grant_access_tokens"),
            ("select * from access_tokens where account_id_hash = $1", "access_tokens"),
        ]
        for (sql, table) in unkeyed { #expect(!Self.isKeyed(sql, table: table), "\(sql)") }
        #expect(Self.mentions("select 1 from refresh_tokens r", "refresh_tokens"))
        #expect(!Self.mentions("create index refresh_tokens_updated_idx", "refresh_tokens"))
    }
}
