import Foundation
import IdentityCore
import PostgresBridge
import TokenRelayBase

/// `token_issuance_counts`: how many tokens each API key was given for each account, and when
/// last (behaviour §12 Audit). Written only in batches by ``IssuanceCounter``.
package struct IssuanceStore: Sendable {
    package let database: Database

    package init(database: Database) {
        self.database = database
    }

    /// One row of the read side.
    package struct Row: Sendable, Equatable {
        package let keyId: String
        package let count: Int64
        /// RFC 3339, UTC.
        package let lastAt: String

        package var json: JSONValue {
            .object(["key_id": .string(keyId), "count": .number(Double(count)), "last_at": .string(lastAt)])
        }
    }

    /// Adds a batch of tallies with one statement: counts add up, `last_at` keeps the later time;
    /// per (account, key) in `token_issuance_counts`, per (token `uti`, key) in `token_receipts`.
    /// - Throws: `RelayError` when the database fails (the caller keeps the tallies).
    package func add(_ batch: [(IssuanceCounter.Pair, IssuanceCounter.Tally)]) async throws {
        guard !batch.isEmpty else { return }
        let rows: [JSONValue] = batch.map { pair, tally in
            .object([
                "account_id": .string(pair.accountId), "key_id": .string(pair.keyId), "uti": pair.uti.map(JSONValue.string) ?? .null,
                "count": .number(Double(tally.count)), "last_at": .number(tally.lastAt),
            ])
        }
        let json = String(decoding: JSONWriter.encode(.array(rows)), as: UTF8.self)
        try await database.run { connection in
            // Grouped first: one batch holds a pair once per token, and an UPSERT may not touch a row twice.
            _ = try connection.query(
                """
                WITH batch AS (
                  SELECT * FROM jsonb_to_recordset($1::jsonb) AS batch(account_id text, key_id text, uti text, count bigint, last_at double precision)),
                receipts AS (
                  INSERT INTO token_receipts (uti, key_id, account_id, count, last_at)
                  SELECT uti, key_id, account_id, sum(count), to_timestamp(max(last_at)) FROM batch WHERE uti IS NOT NULL
                  GROUP BY account_id, uti, key_id
                  ON CONFLICT (account_id, uti, key_id) DO UPDATE
                  SET count = token_receipts.count + EXCLUDED.count, last_at = GREATEST(token_receipts.last_at, EXCLUDED.last_at))
                INSERT INTO token_issuance_counts (account_id, key_id, count, last_at)
                SELECT account_id, key_id, sum(count), to_timestamp(max(last_at)) FROM batch GROUP BY account_id, key_id
                ON CONFLICT (account_id, key_id) DO UPDATE
                SET count = token_issuance_counts.count + EXCLUDED.count,
                    last_at = GREATEST(token_issuance_counts.last_at, EXCLUDED.last_at)
                """, [.text(json)])
        }
    }

    /// Every key's count for one account, by key id.
    package func counts(accountId: String) async throws -> [Row] {
        try await database.run { connection in
            try connection.query(
                """
                SELECT key_id, count, to_char(last_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS last_at
                FROM token_issuance_counts WHERE account_id = $1 ORDER BY key_id
                """, [.text(accountId)]
            ).rows.map { Row(keyId: $0.string("key_id") ?? "", count: $0.int("count") ?? 0, lastAt: $0.string("last_at") ?? "") }
        }
    }
}
