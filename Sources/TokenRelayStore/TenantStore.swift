import IdentityCore
import PostgresBridge
import TokenRelayBase

/// One customer tenant as `GET /v1/tenants` and `token-relay tenants list` show it (behaviour §12 Tenants).
package struct TenantRecord: Sendable, Equatable {
    /// The tenant id (a GUID), lower-cased.
    package let tenantId: String
    /// Accounts of the tenant: home tenant (the utid of `home_account_id`), realm, or any tenant profile.
    package let accounts: Int
    /// When it was suspended (RFC 3339, UTC), nil when it is not.
    package let suspendedAt: String?
    /// Who suspended it: an API key id or `cli`.
    package let suspendedBy: String?
    /// Key ids of what is sealed for the tenant today, sorted (refresh tokens of accounts in its
    /// realm; access, app and on-behalf-of tokens of its realm): its data key's id, and ring key
    /// ids for rows not yet moved under it by `token-relay encryption rotate`.
    package let keyIds: [String]
    /// The tenant's data key (ADR 0017): its id and the key-encryption key wrapping it; nil until
    /// the tenant's first row is sealed.
    package var dataKey: (id: String, kekId: String)? = nil

    /// `{tenant_id, accounts, suspended, suspended_at, suspended_by, data_key}`. `data_key` says
    /// how the tenant's rows are sealed (behaviour §12 Tenants; ADR 0017): `{"kind": "tenant",
    /// "data_key_id", "kek_id", "key_ids"}` under its own data key, or `{"kind": "key_ring",
    /// "key_ids"}` while it has none.
    package var json: JSONValue {
        var key: [String: JSONValue] = ["kind": .string(dataKey == nil ? "key_ring" : "tenant"), "key_ids": .array(keyIds.map(JSONValue.string))]
        if let dataKey {
            key["data_key_id"] = .string(dataKey.id)
            key["kek_id"] = .string(dataKey.kekId)
        }
        return .object([
            "tenant_id": .string(tenantId), "accounts": .number(Double(accounts)), "suspended": .bool(suspendedAt != nil),
            "suspended_at": suspendedAt.map(JSONValue.string) ?? .null, "suspended_by": suspendedBy.map(JSONValue.string) ?? .null,
            "data_key": .object(key),
        ])
    }

    package static func == (left: TenantRecord, right: TenantRecord) -> Bool {
        left.tenantId == right.tenantId && left.accounts == right.accounts && left.suspendedAt == right.suspendedAt
            && left.suspendedBy == right.suspendedBy && left.keyIds == right.keyIds && left.dataKey?.id == right.dataKey?.id
            && left.dataKey?.kekId == right.dataKey?.kekId
    }
}

/// SQL of tenant suspension (behaviour §12 Tenants): the `tenant_suspensions` rows every replica's
/// ``TenantSuspensions`` mirrors, changed with a replica notification and an audit row in the
/// same transaction, and the tenant listing.
package struct TenantStore: Sendable {
    package let database: Database
    /// Accounts of this client id only; nil = every client id (the command line without one).
    package let clientId: String?

    package init(database: Database, clientId: String?) {
        self.database = database
        self.clientId = clientId
    }

    /// Suspends `tenantId` (lower-cased GUID); a no-op when it already is. Other replicas learn
    /// it at COMMIT (``ReplicaNotifications``).
    /// - Returns: whether this call suspended it.
    /// - Throws: ``StoreError``.
    package func suspend(tenantId: String, actor: String) async throws -> Bool {
        try await database.transaction { connection in
            let inserted =
                try connection.query(
                    "INSERT INTO tenant_suspensions (tenant_id, suspended_by) VALUES ($1, $2) ON CONFLICT DO NOTHING", [.text(tenantId), .text(actor)]
                ).affectedRows > 0
            if inserted { try ReplicaNotifications.send(.tenantSuspended(tenantId), in: connection) }
            try AuditStore.record(
                in: connection, .tenantSuspended, actor: actor, accountId: nil, outcome: inserted ? "suspended" : "already_suspended",
                detail: ["tenant_id": .string(tenantId)])
            return inserted
        }
    }

    /// Resumes `tenantId`; a no-op when it is not suspended.
    /// - Returns: whether this call resumed it.
    /// - Throws: ``StoreError``.
    package func resume(tenantId: String, actor: String) async throws -> Bool {
        try await database.transaction { connection in
            let deleted = try connection.query("DELETE FROM tenant_suspensions WHERE tenant_id = $1", [.text(tenantId)]).affectedRows > 0
            if deleted { try ReplicaNotifications.send(.tenantResumed(tenantId), in: connection) }
            try AuditStore.record(
                in: connection, .tenantResumed, actor: actor, accountId: nil, outcome: deleted ? "resumed" : "not_suspended",
                detail: ["tenant_id": .string(tenantId)])
            return deleted
        }
    }

    /// What `token-relay tenants forget` did.
    package struct Forgotten: Sendable {
        package let accountsDeleted: Int
        /// Access, app and on-behalf-of token rows of the tenant's realm held by accounts of other
        /// tenants (guests), deleted too.
        package let tokenRowsDeleted: Int
        /// The data key destroyed; nil when the tenant had none.
        package let dataKeyId: String?

        package var json: JSONValue {
            .object([
                "accounts_deleted": .number(Double(accountsDeleted)), "token_rows_deleted": .number(Double(tokenRowsDeleted)),
                "data_key_destroyed": dataKeyId.map(JSONValue.string) ?? .null,
            ])
        }
    }

    /// Crypto-shredding for offboarding (issue 12 part 1, ADR 0017): deletes every account of
    /// `tenantId` (realm, home tenant or tenant profile, as ``list(afterTenantId:limit:visibleTenants:)``
    /// counts them; each with its `account.deleted` event), every token row sealed for that realm,
    /// then the tenant's data key, with an audit row, in one transaction. Every replica drops the
    /// tenant's data key and memories at COMMIT. A row of the tenant restored later from a dump
    /// taken after this does not open: its data key no longer exists.
    /// - Parameter progress: told the accounts to delete, then each one deleted (the command line's progress).
    /// - Throws: ``StoreError``.
    package func forget(tenantId: String, actor: String, progress: (any ProgressSink)? = nil) async throws -> Forgotten {
        let clientId = self.clientId
        return try await database.transaction { connection in
            let accounts = try Self.accountIds(in: connection, tenantId: tenantId, clientId: clientId, lock: true)
            progress?.begin("accounts", total: accounts.count)
            var deleted = 0
            for id in accounts {
                if try TokenStore.deleteAccount(in: connection, id: id, clientId: clientId, actor: actor) { deleted += 1 }
                progress?.advance(by: 1)
            }
            progress?.end()
            var rows = 0
            for table in Self.realmTokenTables {
                rows += try connection.query("DELETE FROM \(table) WHERE lower(realm) = $1", [.text(tenantId)]).affectedRows
            }
            let dataKeyId = try DataKeyStore.delete(in: connection, tenantId: tenantId)
            if let dataKeyId { try connection.query("DELETE FROM encryption_key_usage WHERE key_id = $1", [.text(dataKeyId)]) }
            try ReplicaNotifications.send(.tenantForgotten(tenantId), in: connection)
            let forgotten = Forgotten(accountsDeleted: deleted, tokenRowsDeleted: rows, dataKeyId: dataKeyId)
            guard case .object(var detail) = forgotten.json else { return forgotten }
            detail["tenant_id"] = .string(tenantId)
            try AuditStore.record(
                in: connection, .tenantForgotten, actor: actor, accountId: nil, outcome: dataKeyId == nil ? "no_data_key" : "forgotten", detail: detail)
            return forgotten
        }
    }

    /// The token tables whose rows name a realm and no account (guests' access tokens of other
    /// accounts, app and on-behalf-of tokens): `forget` deletes those of the tenant's realm after its accounts.
    package static let realmTokenTables = ["access_tokens", "grant_access_tokens", "obo_refresh_tokens"]

    /// The accounts of `tenantId` as ``forget(tenantId:actor:progress:)`` deletes them (realm,
    /// home tenant or tenant profile), in id order; locked with `lock`.
    private static func accountIds(in connection: PostgresConnection, tenantId: String, clientId: String?, lock: Bool) throws -> [String] {
        try connection.query(
            """
            SELECT account_id FROM accounts a WHERE ($1::text IS NULL OR a.client_id = $1) AND (lower(a.realm) = $2
              OR (a.home_account_id LIKE '%_._%' AND lower(split_part(a.home_account_id, '.', 2)) = $2)
              OR EXISTS (SELECT 1 FROM account_tenant_profiles tp WHERE tp.account_id = a.account_id AND lower(tp.realm) = $2))
            ORDER BY account_id\(lock ? " FOR UPDATE" : "")
            """, [TokenStore.optional(clientId), .text(tenantId)]
        ).rows.compactMap { $0.string("account_id") }
    }

    /// What `token-relay tenants forget --dry-run` says would go.
    package struct ForgetPlan: Sendable {
        package let accountIds: [String]
        /// Rows of each of ``TenantStore/realmTokenTables`` that would be deleted besides the
        /// accounts' own (those go with their account).
        package let tokenRows: [String: Int]
        package let dataKeyId: String?

        package var json: JSONValue {
            .object([
                "dry_run": .bool(true), "accounts_to_delete": .number(Double(accountIds.count)),
                "account_ids": .array(accountIds.map(JSONValue.string)),
                "token_rows_to_delete": .number(Double(tokenRows.values.reduce(0, +))),
                "token_rows": .object(tokenRows.mapValues { .number(Double($0)) }),
                "data_key_to_destroy": dataKeyId.map(JSONValue.string) ?? .null,
            ])
        }
    }

    /// What ``forget(tenantId:actor:progress:)`` would delete now, read in one snapshot
    /// (a repeatable-read transaction); nothing is written or locked.
    /// - Throws: ``StoreError``.
    package func forgetPlan(tenantId: String) async throws -> ForgetPlan {
        let clientId = self.clientId
        return try await database.transaction { connection in
            try connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            let accounts = try Self.accountIds(in: connection, tenantId: tenantId, clientId: clientId, lock: false)
            var rows: [String: Int] = [:]
            for table in Self.realmTokenTables {
                // Access tokens of the accounts themselves go with them (ON DELETE CASCADE).
                let others = table == "access_tokens" ? " AND NOT (account_id = ANY($2::text[]))" : " AND $2::text[] IS NOT NULL"
                rows[table] = Int(
                    try connection.query(
                        "SELECT count(*) AS n FROM \(table) WHERE lower(realm) = $1\(others)",
                        [.text(tenantId), .text(APIKeyStore.arrayLiteral(accounts))]
                    ).rows.first?.int("n") ?? 0)
            }
            let dataKey = try connection.query("SELECT data_key_id FROM data_keys WHERE tenant_id = $1", [.text(tenantId)]).rows.first?.string("data_key_id")
            return ForgetPlan(accountIds: accounts, tokenRows: rows, dataKeyId: dataKey)
        }
    }

    /// Every suspended tenant (lower-cased): one small read, the whole table.
    package func suspendedTenants() async throws -> Set<String> {
        try await database.run { connection in
            Set(try connection.query("SELECT tenant_id FROM tenant_suspensions").rows.compactMap { $0.string("tenant_id") })
        }
    }

    /// Tenants seen (in an account's realm, home tenant or tenant profile, in an app or
    /// on-behalf-of token's realm) or suspended, after `afterTenantId`, ordered by tenant id.
    /// - Parameter visibleTenants: lower-cased tenants an API key is limited to; nil = every tenant.
    /// - Complexity: one statement, linear in the accounts of the client id: the page of tenants is
    ///   chosen first, then counts and key ids are aggregated for that page only (10,000 accounts
    ///   in 100 tenants: 0.3-0.6 s a page of 51 on the shared test machine, against 1.0-2.6 s
    ///   for a count per tenant row).
    package func list(afterTenantId: String?, limit: Int, visibleTenants: [String]? = nil) async throws -> [TenantRecord] {
        let clientId = self.clientId
        return try await database.run { connection in
            try connection.query(
                """
                WITH own AS (SELECT account_id, realm, home_account_id FROM accounts WHERE $1::text IS NULL OR client_id = $1),
                seen AS (
                  SELECT lower(realm) AS tenant_id, account_id FROM own
                  UNION SELECT lower(split_part(home_account_id, '.', 2)), account_id FROM own WHERE home_account_id LIKE '%_._%'
                  UNION SELECT lower(tp.realm), tp.account_id FROM account_tenant_profiles tp JOIN own USING (account_id)
                ),
                page AS (
                  SELECT tenant_id FROM (
                    SELECT tenant_id FROM seen
                    UNION SELECT lower(realm) FROM grant_access_tokens WHERE $1::text IS NULL OR client_id = $1
                    UNION SELECT tenant_id FROM tenant_suspensions) t
                  WHERE ($2::text IS NULL OR tenant_id > $2) AND ($4::text[] IS NULL OR tenant_id = ANY($4::text[]))
                  ORDER BY tenant_id LIMIT $3
                ),
                members AS (SELECT s.tenant_id, s.account_id FROM seen s JOIN page USING (tenant_id)),
                keys AS (
                  SELECT m.tenant_id, r.key_id FROM members m JOIN own o USING (account_id) JOIN refresh_tokens r USING (account_id)
                    WHERE lower(o.realm) = m.tenant_id
                  UNION SELECT m.tenant_id, a.key_id FROM members m JOIN access_tokens a USING (account_id) WHERE lower(a.realm) = m.tenant_id
                  UNION SELECT p.tenant_id, g.key_id FROM page p JOIN grant_access_tokens g ON lower(g.realm) = p.tenant_id
                  UNION SELECT p.tenant_id, o.key_id FROM page p JOIN obo_refresh_tokens o ON lower(o.realm) = p.tenant_id
                )
                SELECT p.tenant_id, ts.suspended_by,
                  to_char(ts.suspended_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS suspended_at,
                  COALESCE(c.accounts, 0) AS accounts, k.key_ids, dk.data_key_id, dk.kek_id
                FROM page p
                  LEFT JOIN (SELECT tenant_id, count(*) AS accounts FROM members GROUP BY tenant_id) c USING (tenant_id)
                  LEFT JOIN (SELECT tenant_id, string_agg(key_id, ' ' ORDER BY key_id) AS key_ids FROM keys GROUP BY tenant_id) k USING (tenant_id)
                  LEFT JOIN tenant_suspensions ts USING (tenant_id)
                  LEFT JOIN data_keys dk USING (tenant_id)
                ORDER BY p.tenant_id
                """,
                [
                    TokenStore.optional(clientId), TokenStore.optional(afterTenantId), .int(Int64(limit)),
                    visibleTenants.map { .text(APIKeyStore.arrayLiteral($0)) } ?? .null,
                ]
            ).rows.map { row in
                TenantRecord(
                    tenantId: row.string("tenant_id") ?? "", accounts: Int(row.int("accounts") ?? 0), suspendedAt: row.string("suspended_at"),
                    suspendedBy: row.string("suspended_by"), keyIds: (row.string("key_ids") ?? "").split(separator: " ").map(String.init),
                    dataKey: row.string("data_key_id").map { ($0, row.string("kek_id") ?? "") })
            }
        }
    }

    /// The one tenant `tenantId` as ``list(afterTenantId:limit:visibleTenants:)`` shows it (also
    /// when nothing of it was seen: 0 accounts).
    package func tenant(_ tenantId: String) async throws -> TenantRecord {
        let page = try await list(afterTenantId: nil, limit: 1, visibleTenants: [tenantId])
        return page.first ?? TenantRecord(tenantId: tenantId, accounts: 0, suspendedAt: nil, suspendedBy: nil, keyIds: [])
    }
}
