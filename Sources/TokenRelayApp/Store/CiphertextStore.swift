import Foundation
import PostgresBridge

/// One kind of ciphertext column set in one table: where `token-relay encryption rotate` finds
/// rows to re-encrypt, and how to rebuild each row's additional authenticated data.
struct CiphertextColumns: Sendable {
    let table: String
    let kind: SealingContext.Kind
    /// SQL expression giving the sealing owner (a column, or e.g. `'app:' || tenant_id`).
    let owner: String
    /// SQL expression giving the client id; nil means the configured client id.
    let clientId: String?
    var keyId = "key_id"
    var nonce = "nonce"
    var ciphertext = "ciphertext"

    /// Every ciphertext the database holds. A new token table adds one line here.
    static let all: [CiphertextColumns] = [
        CiphertextColumns(table: "refresh_tokens", kind: .refreshToken, owner: "account_id", clientId: "client_id"),
        CiphertextColumns(table: "access_tokens", kind: .accessToken, owner: "account_id", clientId: "client_id"),
        CiphertextColumns(table: "grant_access_tokens", kind: .accessToken, owner: "owner", clientId: "client_id"),
        CiphertextColumns(table: "obo_refresh_tokens", kind: .refreshToken, owner: "owner", clientId: "client_id"),
        CiphertextColumns(
            table: "sign_ins", kind: .pkceVerifier, owner: "sign_in_id", clientId: nil, keyId: "verifier_key_id", nonce: "verifier_nonce",
            ciphertext: "verifier_ciphertext"),
    ]
}

/// What one batch of a rotation did.
struct RotationBatch: Sendable {
    var reencrypted = 0
    /// Rows that did not open (key not in the ring, or a ciphertext moved to another row).
    var failed: [(owner: String, keyId: String)] = []
    /// The last row looked at, for the next batch; nil when the table has no more rows to visit.
    var cursor: String?
}

/// SQL of key rotation and key usage (behaviour §7, §12 Encryption keys).
struct CiphertextStore: Sendable {
    let database: Database
    let clientId: String
    let cipher: TokenCipher

    /// Re-encrypts up to `limit` rows of `columns` not under the ring's first key, after row
    /// `cursor` (a `ctid`), in one transaction.
    ///
    /// Rows are locked `FOR UPDATE SKIP LOCKED`, so a row a refresh is writing right now is left
    /// to that refresh (which seals it under the first key itself); each update is also a
    /// compare-and-swap on the key id and nonce read, so it can never overwrite a newer token.
    func rotateBatch(_ columns: CiphertextColumns, after cursor: String, limit: Int) async throws -> RotationBatch {
        let cipher = self.cipher
        let primary = cipher.ring.primary.id
        let clientId = self.clientId
        return try await database.transaction { connection in
            let rows = try connection.query(
                """
                SELECT ctid::text AS row_ref, \(columns.owner) AS owner, \(columns.clientId ?? "$3::text") AS client_id,
                  \(columns.keyId) AS key_id, \(columns.nonce) AS nonce, \(columns.ciphertext) AS ciphertext
                FROM \(columns.table) WHERE \(columns.keyId) <> $1 AND ctid > $2::tid
                ORDER BY ctid LIMIT \(limit) FOR UPDATE SKIP LOCKED
                """,
                [.text(primary), .text(cursor)] + (columns.clientId == nil ? [.text(clientId)] : [])
            ).rows
            var batch = RotationBatch(cursor: rows.last?.string("row_ref"))
            for row in rows {
                let owner = row.string("owner") ?? ""
                let old = SealedSecret(row: row)
                let context = SealingContext(owner: owner, kind: columns.kind, clientId: row.string("client_id") ?? "")
                guard let plaintext = try? cipher.open(old, for: context) else {
                    batch.failed.append((owner, old.keyId))
                    continue
                }
                let sealed = try cipher.seal(plaintext, for: context)
                // Keyed by the owner: a single-shard update where tables are distributed by it
                // (docs/failover.md, Citus); the ctid then names the row within that shard.
                batch.reencrypted += try connection.query(
                    """
                    UPDATE \(columns.table) SET \(columns.keyId) = $1, \(columns.nonce) = $2, \(columns.ciphertext) = $3
                    WHERE \(columns.owner) = $7 AND ctid = $4::tid AND \(columns.keyId) = $5 AND \(columns.nonce) = $6
                    """,
                    [
                        .text(sealed.keyId), .bytes(sealed.nonce), .bytes(sealed.ciphertext), .text(row.string("row_ref") ?? ""), .text(old.keyId),
                        .bytes(old.nonce), .text(owner),
                    ]
                ).affectedRows
            }
            return batch
        }
    }

    /// Rows of `columns` not under the ring's first key.
    func remaining(_ columns: CiphertextColumns) async throws -> Int {
        let primary = cipher.ring.primary.id
        return try await database.run { connection in
            Int(try connection.query("SELECT count(*) AS n FROM \(columns.table) WHERE \(columns.keyId) <> $1", [.text(primary)]).rows.first?.int("n") ?? 0)
        }
    }

    /// Adds the encryptions counted in memory to `encryption_key_usage`, then returns every
    /// key's total. Counts that could not be written are kept for the next flush.
    @discardableResult
    func flushUsage() async throws -> [String: Int64] {
        let counts = cipher.takeUnflushedCounts()
        do {
            return try await database.run { connection in
                for (keyId, count) in counts.sorted(by: { $0.key < $1.key }) {
                    try connection.query(
                        """
                        INSERT INTO encryption_key_usage (key_id, encryptions) VALUES ($1, $2)
                        ON CONFLICT (key_id) DO UPDATE SET encryptions = encryption_key_usage.encryptions + EXCLUDED.encryptions, updated_at = now()
                        """,
                        [.text(keyId), .int(count)])
                }
                var totals: [String: Int64] = [:]
                for row in try connection.query("SELECT key_id, encryptions FROM encryption_key_usage").rows {
                    totals[row.string("key_id") ?? ""] = row.int("encryptions") ?? 0
                }
                return totals
            }
        } catch {
            cipher.restoreUnflushedCounts(counts)
            throw error
        }
    }
}
