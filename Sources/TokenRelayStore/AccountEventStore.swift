import IdentityCore
import PostgresBridge
import TokenRelayBase

/// The transactional outbox of account events: written inside the transaction of the change it
/// reports, read in `seq` order by `GET /v1/events` and the webhook deliverer.
package struct AccountEventStore: Sendable {
    package let database: Database

    package init(database: Database) {
        self.database = database
    }

    /// Appends an event inside the caller's transaction; call it as the transaction's last
    /// statement. The advisory lock makes inserts commit in `seq` order (see the migration).
    /// - Parameter realm: the account's tenant; nil reads it from the account row.
    package static func append(
        in connection: PostgresConnection, _ kind: AccountEvent.Kind, accountId: String?, realm: String? = nil, data: [String: JSONValue] = [:]
    ) throws {
        try connection.query("SELECT pg_advisory_xact_lock(hashtextextended('tokenrelay.account_events', 0))")
        let dataText = String(decoding: JSONWriter.encode(.object(data)), as: UTF8.self)
        try connection.query(
            """
            INSERT INTO account_events (account_id, event_id, type, realm, data)
            VALUES ($1, $2, $3, COALESCE($5, (SELECT realm FROM accounts WHERE account_id = $1)), $4::jsonb)
            """,
            [TokenStore.optional(accountId), .text("evt_" + RandomToken.make(bytes: 16)), .text(kind.rawValue), .text(dataText), TokenStore.optional(realm)])
    }

    /// Appends an event in a transaction of its own (an event that reports no state change).
    package func append(_ kind: AccountEvent.Kind, accountId: String, data: [String: JSONValue] = [:]) async throws {
        try await database.transaction { connection in
            try Self.append(in: connection, kind, accountId: accountId, data: data)
        }
    }

    package static let columns = """
        seq, event_id, type, account_id, lower(realm) AS realm, data::text AS data,
        to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS occurred_at
        """

    /// Up to `limit` events after `afterSeq`, oldest first.
    /// - Parameter visibleTenants: lower-cased tenants an API key is limited to (`KeyAccess`);
    ///   nil = every tenant. Matches the realm the event recorded or any tenant profile of the
    ///   account (behaviour §12: per-key tenant limits match any profile, as `KeyAccess.sees` does).
    package func page(afterSeq: Int64, limit: Int, visibleTenants: [String]? = nil) async throws -> [AccountEvent] {
        try await database.run { connection in
            try connection.query(
                """
                SELECT \(Self.columns) FROM account_events
                WHERE seq > $1 AND ($3::text[] IS NULL OR \(TokenStore.inAnyTenant("$3", of: "account_events")))
                ORDER BY seq LIMIT $2
                """,
                [.int(afterSeq), .int(Int64(limit)), visibleTenants.map { .text(APIKeyStore.arrayLiteral($0)) } ?? .null]
            ).rows.map(Self.event(from:))
        }
    }

    /// The condition of an event the webhook deliverer still owes: not acknowledged, and after
    /// the point where delivery began (``beginDelivery()``); nothing is owed before that point exists.
    package static let owed = "delivered_at IS NULL AND seq > (SELECT after_seq FROM webhook_delivery)"

    /// Up to `limit` events the webhook receiver has not acknowledged, oldest first (one
    /// statement); only events after the point delivery began (``beginDelivery()``).
    package func undelivered(limit: Int) async throws -> [AccountEvent] {
        try await database.run { connection in
            try connection.query(
                "SELECT \(Self.columns) FROM account_events WHERE \(Self.owed) ORDER BY seq LIMIT $1", [.int(Int64(limit))]
            ).rows.map(Self.event(from:))
        }
    }

    /// Records, once per database, that webhook delivery begins now: the events that exist at
    /// this moment are never delivered (issue 10 item 12: a receiver set up today gets today's
    /// events, not the whole history). Idempotent; a later call, or another replica's, keeps the
    /// first point. Takes the writers' advisory lock, so an event whose transaction is committing
    /// right now is either before the point or after it, never lost in between.
    /// - Returns: the `seq` after which events are delivered.
    @discardableResult
    package func beginDelivery() async throws -> Int64 {
        try await database.transaction { connection in
            try connection.query("SELECT pg_advisory_xact_lock(hashtextextended('tokenrelay.account_events', 0))")
            try connection.query(
                """
                INSERT INTO webhook_delivery (after_seq) SELECT COALESCE(max(seq), 0) FROM account_events
                ON CONFLICT (singleton) DO NOTHING
                """)
            return try connection.query("SELECT after_seq FROM webhook_delivery").rows.first?.int("after_seq") ?? 0
        }
    }

    /// Deletes up to `limit` events that occurred more than `days` days ago, oldest first, in one
    /// short statement (behaviour §11 `TOKENRELAY_EVENTS_RETENTION_DAYS`; issue 10 item 12).
    /// - Parameter keepUndelivered: true while a webhook URL is set: an event the receiver still
    ///   owes (``owed``) stays whatever its age, until it is delivered; events before the point
    ///   delivery began are never owed and go.
    /// - Returns: the number of events deleted (fewer than `limit`: nothing older is left).
    package func prune(olderThanDays days: Int, keepUndelivered: Bool, limit: Int) async throws -> Int {
        try await database.run { connection in
            try connection.query(
                """
                DELETE FROM account_events WHERE seq IN (
                  SELECT seq FROM account_events
                  WHERE occurred_at < now() - make_interval(days => $1::int)
                    AND NOT ($2 AND delivered_at IS NULL AND seq > COALESCE((SELECT after_seq FROM webhook_delivery), -1))
                  ORDER BY occurred_at LIMIT $3)
                """,
                [.int(Int64(days)), .bool(keepUndelivered), .int(Int64(limit))]
            ).affectedRows
        }
    }

    /// Records the receiver's acknowledgement of event `seq` (one statement).
    package func markDelivered(seq: Int64) async throws {
        _ = try await database.run { connection in
            try connection.query("UPDATE account_events SET delivered_at = now() WHERE seq = $1", [.int(seq)])
        }
    }

    /// Whether any event waits for delivery (a cheap poll on the partial index).
    package func hasUndelivered() async throws -> Bool {
        try await database.run { connection in
            !(try connection.query("SELECT 1 FROM account_events WHERE \(Self.owed) LIMIT 1").rows.isEmpty)
        }
    }

    package static func event(from row: PostgresRow) -> AccountEvent {
        AccountEvent(
            seq: row.int("seq") ?? 0, id: row.string("event_id") ?? "", type: row.string("type") ?? "",
            occurredAt: row.string("occurred_at") ?? "", accountId: row.string("account_id"), tenantId: row.string("realm"),
            data: JSONValue.parse(row.string("data") ?? "{}") ?? .object([:]))
    }
}
