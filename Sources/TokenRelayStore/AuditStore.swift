import IdentityCore
import PostgresBridge
import TokenRelayBase

/// The audit trail (behaviour §12 Audit): who (API key id), what, which account, the outcome and
/// when. Never a token or secret in `detail`. Rows are only inserted, read by `GET /v1/audit` and
/// `token-relay audit export`, and deleted when older than `TOKENRELAY_AUDIT_RETENTION_DAYS`.
package struct AuditStore: Sendable {
    package let database: Database

    package init(database: Database) {
        self.database = database
    }

    package enum Action: String, Sendable, CaseIterable {
        case signInCompleted = "sign_in.completed"
        /// A sign-in bound to an account completed by another user (behaviour §3.8): `outcome`
        /// `user_mismatch`, the expected account, `detail.sign_in_id`; nothing of the other user.
        case signInRefused = "sign_in.refused"
        case accountDeleted = "account.deleted"
        case accountImported = "account.imported"
        case importCompleted = "account.import_completed"
        case importMerged = "account.import_merged"
        case apiKeyCreated = "api_key.created"
        case apiKeyRevoked = "api_key.revoked"
        case encryptionRotated = "encryption.rotated"
        /// `token-relay encryption rewrap`: data keys wrapped again under the primary KEK (ADR 0017).
        case dataKeysRewrapped = "encryption.rewrapped"
        /// `token-relay tenants forget`: a tenant's accounts deleted and its data key destroyed.
        case tenantForgotten = "tenant.forgotten"
        /// `detail.tenant_id`; `outcome` `suspended` or `already_suspended` (behaviour §12 Tenants).
        case tenantSuspended = "tenant.suspended"
        /// `detail.tenant_id`; `outcome` `resumed` or `not_suspended`.
        case tenantResumed = "tenant.resumed"
    }

    package func record(_ action: Action, actor: String, accountId: String?, outcome: String, detail: [String: JSONValue] = [:]) async throws {
        try await database.run { connection in
            try Self.record(in: connection, action, actor: actor, accountId: accountId, outcome: outcome, detail: detail)
        }
    }

    /// The same row inside a caller's transaction, so it commits with what it describes.
    package static func record(
        in connection: PostgresConnection, _ action: Action, actor: String, accountId: String?, outcome: String, detail: [String: JSONValue] = [:]
    ) throws {
        let detailText = String(decoding: JSONWriter.encode(.object(detail)), as: UTF8.self)
        try connection.query(
            "INSERT INTO audit_events (actor, action, account_id, outcome, detail) VALUES ($1, $2, $3, $4, $5::jsonb)",
            [.text(actor), .text(action.rawValue), TokenStore.optional(accountId), .text(outcome), .text(detailText)])
    }

    /// One row of the trail as `GET /v1/audit` shows it.
    package struct Event: Sendable, Equatable {
        package let id: Int64
        /// RFC 3339, UTC, milliseconds.
        package let occurredAt: String
        package let actor: String
        package let action: String
        package let accountId: String?
        package let outcome: String
        package let detail: JSONValue

        package var json: JSONValue {
            .object([
                "id": .number(Double(id)), "occurred_at": .string(occurredAt), "actor": .string(actor), "action": .string(action),
                "account_id": accountId.map(JSONValue.string) ?? .null, "outcome": .string(outcome), "detail": detail,
            ])
        }
    }

    /// What a page is limited to; nil is any. Times are RFC 3339 texts PostgreSQL reads.
    package struct Filter: Sendable, Equatable {
        package var actor: String?
        package var action: String?
        package var accountId: String?
        /// Rows that occurred at or after this time.
        package var since: String?
        /// Rows that occurred before this time.
        package var until: String?

        package init(actor: String? = nil, action: String? = nil, accountId: String? = nil, since: String? = nil, until: String? = nil) {
            self.actor = actor
            self.action = action
            self.accountId = accountId
            self.since = since
            self.until = until
        }
    }

    /// Up to `limit` rows after row `afterId` that pass `filter`, oldest first (by id, the order
    /// they were written in).
    package func page(_ filter: Filter, afterId: Int64, limit: Int) async throws -> [Event] {
        try await database.run { connection in
            try connection.query(
                """
                SELECT id, to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS occurred_at, actor, action, account_id,
                  outcome, detail::text AS detail
                FROM audit_events
                WHERE id > $1 AND \(Self.filterCondition)
                ORDER BY id LIMIT $7
                """,
                [.int(afterId)] + Self.parameters(filter) + [.int(Int64(limit))]
            ).rows.map { row in
                Event(
                    id: row.int("id") ?? 0, occurredAt: row.string("occurred_at") ?? "", actor: row.string("actor") ?? "",
                    action: row.string("action") ?? "", accountId: row.string("account_id"), outcome: row.string("outcome") ?? "",
                    detail: JSONValue.parse(row.string("detail") ?? "{}") ?? .object([:]))
            }
        }
    }

    /// How many rows pass `filter` after row `afterId` (the total of an export's progress).
    package func count(_ filter: Filter, afterId: Int64 = 0) async throws -> Int {
        try await database.run { connection in
            Int(
                try connection.query(
                    "SELECT count(*) AS n FROM audit_events WHERE id > $1 AND \(Self.filterCondition)",
                    [.int(afterId)] + Self.parameters(filter)
                ).rows.first?.int("n") ?? 0)
        }
    }

    /// The condition of ``Filter`` on parameters `$2`…`$6` (``parameters(_:)``).
    private static let filterCondition = """
        ($2::text IS NULL OR actor = $2) AND ($3::text IS NULL OR action = $3)
          AND ($4::text IS NULL OR account_id = $4) AND ($5::timestamptz IS NULL OR occurred_at >= $5::timestamptz)
          AND ($6::timestamptz IS NULL OR occurred_at < $6::timestamptz)
        """

    private static func parameters(_ filter: Filter) -> [PostgresParameter] {
        [
            TokenStore.optional(filter.actor), TokenStore.optional(filter.action), TokenStore.optional(filter.accountId),
            TokenStore.optional(filter.since), TokenStore.optional(filter.until),
        ]
    }

    /// Who got the access token `uti` (behaviour §12 Audit, token provenance): `{uti, account_id,
    /// scopes, expires_at, obtained_at, obtained_by, received_by: [{key_id, count, last_at}]}`,
    /// receipts as far as flushed; `scopes`, `expires_at`, `obtained_at` and `obtained_by` null
    /// when only receipts are known (a token obtained before migration 0022).
    /// - Returns: nil when nothing is recorded of `uti`.
    package func token(uti: String) async throws -> JSONValue? {
        try await database.run { connection in
            let time = #"'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'"#
            let provenance = try connection.query(
                """
                SELECT account_id, scopes, to_char(expires_at AT TIME ZONE 'UTC', \(time)) AS expires_at,
                  to_char(obtained_at AT TIME ZONE 'UTC', \(time)) AS obtained_at, obtained_by
                FROM token_provenance WHERE uti = $1
                """, [.text(uti)]
            ).rows.first
            let receipts = try connection.query(
                """
                SELECT key_id, account_id, count, to_char(last_at AT TIME ZONE 'UTC', \(time)) AS last_at
                FROM token_receipts WHERE uti = $1 ORDER BY key_id
                """, [.text(uti)]
            ).rows
            guard let accountId = provenance?.string("account_id") ?? receipts.first?.string("account_id") else { return nil }
            func text(_ column: String) -> JSONValue { provenance?.string(column).map(JSONValue.string) ?? .null }
            let scopes: JSONValue =
                provenance.map { .array(($0.string("scopes") ?? "").split(separator: " ").map { .string(String($0)) }) } ?? .null
            return .object([
                "uti": .string(uti), "account_id": .string(accountId), "scopes": scopes, "expires_at": text("expires_at"),
                "obtained_at": text("obtained_at"), "obtained_by": text("obtained_by"),
                "received_by": .array(
                    receipts.map {
                        .object([
                            "key_id": .string($0.string("key_id") ?? ""), "count": .number(Double($0.int("count") ?? 0)),
                            "last_at": .string($0.string("last_at") ?? ""),
                        ])
                    }),
            ])
        }
    }

    /// Deletes up to `limit` rows of each of `audit_events`, `token_provenance` and
    /// `token_receipts` older than `days` days (by when they occurred, were obtained, were last
    /// received), oldest first, in one short statement (`TOKENRELAY_AUDIT_RETENTION_DAYS`).
    /// - Returns: the rows deleted from each table.
    package func prune(olderThanDays days: Int, limit: Int) async throws -> (events: Int, provenance: Int, receipts: Int) {
        try await database.run { connection in
            let row = try connection.query(
                """
                WITH cutoff AS (SELECT now() - make_interval(days => $1::int) AS at),
                events AS (
                  DELETE FROM audit_events WHERE id IN (
                    SELECT id FROM audit_events WHERE occurred_at < (SELECT at FROM cutoff) ORDER BY occurred_at LIMIT $2)
                  RETURNING 1),
                provenance AS (
                  DELETE FROM token_provenance WHERE (account_id, uti) IN (
                    SELECT account_id, uti FROM token_provenance WHERE obtained_at < (SELECT at FROM cutoff) ORDER BY obtained_at LIMIT $2)
                  RETURNING 1),
                receipts AS (
                  DELETE FROM token_receipts WHERE (account_id, uti, key_id) IN (
                    SELECT account_id, uti, key_id FROM token_receipts WHERE last_at < (SELECT at FROM cutoff) ORDER BY last_at LIMIT $2)
                  RETURNING 1)
                SELECT (SELECT count(*) FROM events) AS events, (SELECT count(*) FROM provenance) AS provenance,
                  (SELECT count(*) FROM receipts) AS receipts
                """, [.int(Int64(days)), .int(Int64(limit))]
            ).rows.first
            return (Int(row?.int("events") ?? 0), Int(row?.int("provenance") ?? 0), Int(row?.int("receipts") ?? 0))
        }
    }

    /// Every action's name (`action` filter values).
    package static let actionNames: Set<String> = Set(Action.allCases.map(\.rawValue))
}
