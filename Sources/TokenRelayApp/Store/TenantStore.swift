import IdentityCore
import PostgresBridge

/// One customer tenant as `GET /v1/tenants` and `token-relay tenants list` show it (behaviour §12 Tenants).
struct TenantRecord: Sendable, Equatable {
    /// The tenant id (a GUID), lower-cased.
    let tenantId: String
    /// Accounts of the tenant: home tenant (the utid of `home_account_id`), realm, or any tenant profile.
    let accounts: Int
    /// When it was suspended (RFC 3339, UTC), nil when it is not.
    let suspendedAt: String?
    /// Who suspended it: an API key id, `bootstrap` or `cli`.
    let suspendedBy: String?
    /// Ring key ids the tenant's stored secrets are sealed under today, sorted (its accounts'
    /// refresh and access tokens, app and on-behalf-of tokens in its realm).
    let keyIds: [String]

    /// `{tenant_id, accounts, suspended, suspended_at, suspended_by, data_key}`. `data_key` says
    /// how the tenant's rows are sealed: today `{"kind": "key_ring", "key_ids": [...]}`, the
    /// ring's keys in use (behaviour §12 Tenants; ADR 0004). Per-tenant data keys (issue 12 part 1)
    /// add their own `kind` and members here.
    var json: JSONValue {
        .object([
            "tenant_id": .string(tenantId), "accounts": .number(Double(accounts)), "suspended": .bool(suspendedAt != nil),
            "suspended_at": suspendedAt.map(JSONValue.string) ?? .null, "suspended_by": suspendedBy.map(JSONValue.string) ?? .null,
            "data_key": .object(["kind": .string("key_ring"), "key_ids": .array(keyIds.map(JSONValue.string))]),
        ])
    }
}

/// SQL of tenant suspension (behaviour §12 Tenants): the `tenant_suspensions` rows every replica's
/// ``TenantSuspensions`` mirrors, changed with a replica notification and an audit row in the
/// same transaction, and the tenant listing.
struct TenantStore: Sendable {
    let database: Database
    /// Accounts of this client id only; nil = every client id (the command line without one).
    let clientId: String?

    /// Suspends `tenantId` (lower-cased GUID); a no-op when it already is. Other replicas learn
    /// it at COMMIT (``ReplicaNotifications``).
    /// - Returns: whether this call suspended it.
    /// - Throws: ``StoreError``.
    func suspend(tenantId: String, actor: String) async throws -> Bool {
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
    func resume(tenantId: String, actor: String) async throws -> Bool {
        try await database.transaction { connection in
            let deleted = try connection.query("DELETE FROM tenant_suspensions WHERE tenant_id = $1", [.text(tenantId)]).affectedRows > 0
            if deleted { try ReplicaNotifications.send(.tenantResumed(tenantId), in: connection) }
            try AuditStore.record(
                in: connection, .tenantResumed, actor: actor, accountId: nil, outcome: deleted ? "resumed" : "not_suspended",
                detail: ["tenant_id": .string(tenantId)])
            return deleted
        }
    }

    /// Every suspended tenant (lower-cased): one small read, the whole table.
    func suspendedTenants() async throws -> Set<String> {
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
    func list(afterTenantId: String?, limit: Int, visibleTenants: [String]? = nil) async throws -> [TenantRecord] {
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
                  SELECT m.tenant_id, r.key_id FROM members m JOIN refresh_tokens r USING (account_id)
                  UNION SELECT m.tenant_id, a.key_id FROM members m JOIN access_tokens a USING (account_id)
                  UNION SELECT p.tenant_id, g.key_id FROM page p JOIN grant_access_tokens g ON lower(g.realm) = p.tenant_id
                  UNION SELECT p.tenant_id, o.key_id FROM page p JOIN obo_refresh_tokens o ON lower(o.realm) = p.tenant_id
                )
                SELECT p.tenant_id, ts.suspended_by,
                  to_char(ts.suspended_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS suspended_at,
                  COALESCE(c.accounts, 0) AS accounts, k.key_ids
                FROM page p
                  LEFT JOIN (SELECT tenant_id, count(*) AS accounts FROM members GROUP BY tenant_id) c USING (tenant_id)
                  LEFT JOIN (SELECT tenant_id, string_agg(key_id, ' ' ORDER BY key_id) AS key_ids FROM keys GROUP BY tenant_id) k USING (tenant_id)
                  LEFT JOIN tenant_suspensions ts USING (tenant_id)
                ORDER BY p.tenant_id
                """,
                [
                    TokenStore.optional(clientId), TokenStore.optional(afterTenantId), .int(Int64(limit)),
                    visibleTenants.map { .text(APIKeyStore.arrayLiteral($0)) } ?? .null,
                ]
            ).rows.map { row in
                TenantRecord(
                    tenantId: row.string("tenant_id") ?? "", accounts: Int(row.int("accounts") ?? 0), suspendedAt: row.string("suspended_at"),
                    suspendedBy: row.string("suspended_by"), keyIds: (row.string("key_ids") ?? "").split(separator: " ").map(String.init))
            }
        }
    }

    /// The one tenant `tenantId` as ``list(afterTenantId:limit:visibleTenants:)`` shows it (also
    /// when nothing of it was seen: 0 accounts).
    func tenant(_ tenantId: String) async throws -> TenantRecord {
        let page = try await list(afterTenantId: nil, limit: 1, visibleTenants: [tenantId])
        return page.first ?? TenantRecord(tenantId: tenantId, accounts: 0, suspendedAt: nil, suspendedBy: nil, keyIds: [])
    }
}
