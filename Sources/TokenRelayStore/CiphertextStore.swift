import Foundation
import PostgresBridge
import TokenRelayBase

/// One kind of ciphertext column set in one table: where `token-relay encryption rotate` finds
/// rows to re-encrypt, and how to rebuild each row's additional authenticated data.
package struct CiphertextColumns: Sendable {
    package let table: String
    package let kind: SealingContext.Kind
    /// SQL expression giving the sealing owner (a column, or e.g. `'app:' || tenant_id`).
    package let owner: String
    /// SQL expression giving the client id; nil means the configured client id.
    package let clientId: String?
    /// SQL expression giving the tenant whose data key seals the row (ADR 0017); nil: the row
    /// stays under the ring (a pending sign-in's verifier).
    package var tenant: String? = nil
    /// The primary key's columns, in its order: a rotation walks each table by it (keyset).
    package let key: [KeyColumn]
    package var keyId = "key_id"
    package var nonce = "nonce"
    package var ciphertext = "ciphertext"

    /// One primary-key column, read into a batch's cursor as text and bound back from it.
    package struct KeyColumn: Sendable {
        package let name: String
        package var isBytes = false

        package static func text(_ name: String) -> KeyColumn { KeyColumn(name: name) }
        package var read: String { isBytes ? "encode(\(name), 'hex')" : name }
        package func bind(_ parameter: String) -> String { isBytes ? "decode(\(parameter)::text, 'hex')" : "\(parameter)::text" }
    }

    /// Every ciphertext the database holds. A new token table adds one line here.
    package static let all: [CiphertextColumns] = [
        CiphertextColumns(
            table: "refresh_tokens", kind: .refreshToken, owner: "account_id", clientId: "client_id",
            tenant: "(SELECT a.realm FROM accounts a WHERE a.account_id = refresh_tokens.account_id)", key: [.text("account_id"), .text("client_id")]),
        CiphertextColumns(
            table: "access_tokens", kind: .accessToken, owner: "account_id", clientId: "client_id", tenant: "realm",
            key: ["account_id", "environment", "realm", "client_id", "target"].map(KeyColumn.text)),
        CiphertextColumns(
            table: "grant_access_tokens", kind: .accessToken, owner: "owner", clientId: "client_id", tenant: "realm",
            key: ["owner", "environment", "realm", "client_id", "target"].map(KeyColumn.text)),
        CiphertextColumns(
            table: "obo_refresh_tokens", kind: .refreshToken, owner: "owner", clientId: "client_id", tenant: "realm",
            key: ["owner", "environment", "client_id"].map(KeyColumn.text)),
        CiphertextColumns(
            table: "sign_ins", kind: .pkceVerifier, owner: "sign_in_id", clientId: nil, key: [KeyColumn(name: "state_hash", isBytes: true)],
            keyId: "verifier_key_id", nonce: "verifier_nonce", ciphertext: "verifier_ciphertext"),
    ]
}

/// What one batch of a rotation did.
package struct RotationBatch: Sendable {
    package var reencrypted = 0
    /// Rows that did not open (key not in the ring, or a ciphertext moved to another row).
    package var failed: [(owner: String, keyId: String)] = []
    /// Data keys the batch needed and did not hold: loaded after it, then the batch runs again.
    package var needed: [DataKeyNeeded] = []
    /// The primary key of the last row looked at (as text), for the next batch; nil when the
    /// table has no more rows to visit.
    package var cursor: [String]?
}

/// SQL of key rotation and key usage (behaviour §7, §12 Encryption keys).
package struct CiphertextStore: Sendable {
    package let database: Database
    package let clientId: String
    package let cipher: TokenCipher

    package init(database: Database, clientId: String, cipher: TokenCipher) {
        self.database = database
        self.clientId = clientId
        self.cipher = cipher
    }

    /// Re-encrypts up to `limit` rows of `columns` not under the ring's first key, after the
    /// primary key `cursor` (nil: from the start), in one transaction.
    ///
    /// The walk is keyset pagination on the primary key's index, so a sweep reads each row once
    /// whatever its length. (It was `ctid > cursor ORDER BY ctid`, which no index serves: every
    /// batch sorted all the rows after the cursor, a sweep was quadratic; issue 13.)
    ///
    /// Rows are locked `FOR UPDATE SKIP LOCKED`, so a row a refresh is writing right now is left
    /// to that refresh (which seals it under the first key itself); each update is also a
    /// compare-and-swap on the key id and nonce read, so it can never overwrite a newer token. The
    /// batch's updates go in one statement (a row per round trip re-encrypted about 400–1,100 rows/s
    /// on the shared bench machine, an hour for a million accounts; issue 13).
    package func rotateBatch(_ columns: CiphertextColumns, after cursor: [String]?, limit: Int) async throws -> RotationBatch {
        var total = RotationBatch()
        while true {
            // Rows whose tenant's data key was not in memory were skipped; with the keys loaded (no
            // connection held) the same batch runs again, and finds only those rows still to do.
            let batch = try await rotateOnce(columns, after: cursor, limit: limit)
            total.reencrypted += batch.reencrypted
            total.failed += batch.failed
            total.cursor = batch.cursor
            guard !batch.needed.isEmpty else { return total }
            var loaded = Set<String>()
            for needed in batch.needed where loaded.insert(needed.description).inserted { try await needed.load() }
        }
    }

    private func rotateOnce(_ columns: CiphertextColumns, after cursor: [String]?, limit: Int) async throws -> RotationBatch {
        let cipher = self.cipher
        let primary = cipher.ring.primary.id
        let envelope = isEnvelope(columns)
        let clientId = self.clientId
        let statement = Self.batchStatement(columns, afterCursor: cursor != nil, limit: limit, envelope: envelope)
        return try await database.transaction { connection in
            let rows = try connection.query(statement, [.text(primary), .text(clientId)] + (cursor ?? []).map(PostgresParameter.text)).rows
            var batch = RotationBatch(cursor: rows.last.map { row in columns.key.indices.map { row.string("cursor_\($0)") ?? "" } })
            var updates:
                (refs: [String], owners: [String], keyIds: [String], nonces: [String], ciphertexts: [String], oldKeyIds: [String], oldNonces: [String]) = (
                    [], [], [], [], [], [], []
                )
            for row in rows {
                let owner = row.string("owner") ?? ""
                let old = SealedSecret(row: row)
                let context = SealingContext(
                    owner: owner, kind: columns.kind, clientId: row.string("client_id") ?? "", tenantId: envelope ? row.string("tenant_id") : nil)
                let sealed: SealedSecret
                do {
                    guard let plaintext = try cipher.openIfPossible(old, for: context) else {
                        batch.failed.append((owner, old.keyId))
                        continue
                    }
                    sealed = try cipher.seal(plaintext, for: context)
                } catch let needed as DataKeyNeeded {
                    batch.needed.append(needed)
                    continue
                }
                updates.refs.append(row.string("row_ref") ?? "")
                updates.owners.append(owner)
                updates.keyIds.append(sealed.keyId)
                updates.nonces.append(SealedSecret.hex(sealed.nonce))
                updates.ciphertexts.append(SealedSecret.hex(sealed.ciphertext))
                updates.oldKeyIds.append(old.keyId)
                updates.oldNonces.append(SealedSecret.hex(old.nonce))
            }
            guard !updates.refs.isEmpty else { return batch }
            // The whole batch in one statement (one round trip, not one per row); each row is
            // still a compare-and-swap on the key id and nonce read. Keyed by the owner too: a
            // single-shard update where tables are distributed by it (docs/failover.md, Citus);
            // the ctid then names the row within that shard.
            batch.reencrypted = try connection.query(
                """
                UPDATE \(columns.table) AS t SET \(columns.keyId) = v.key_id, \(columns.nonce) = decode(v.nonce, 'hex'),
                  \(columns.ciphertext) = decode(v.ciphertext, 'hex')
                FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
                  AS v(row_ref, owner, key_id, nonce, ciphertext, old_key_id, old_nonce)
                WHERE t.\(columns.owner) = v.owner AND t.ctid = v.row_ref::tid AND t.\(columns.keyId) = v.old_key_id
                  AND t.\(columns.nonce) = decode(v.old_nonce, 'hex')
                """,
                [updates.refs, updates.owners, updates.keyIds, updates.nonces, updates.ciphertexts, updates.oldKeyIds, updates.oldNonces].map {
                    .text(APIKeyStore.arrayLiteral($0))
                }
            ).affectedRows
            return batch
        }
    }

    /// The statement that reads one batch: `$1` the ring's first key id, `$2` the configured
    /// client id (for a table without the column; always bound, so always referenced), `$3`… the
    /// cursor's key values when `afterCursor`. With `envelope`, the rows to do are those under any
    /// ring key (they go to their tenant's data key), else those not under the ring's first key.
    package static func batchStatement(_ columns: CiphertextColumns, afterCursor: Bool, limit: Int, envelope: Bool = false) -> String {
        let keyList = columns.key.map(\.name).joined(separator: ", ")
        let after = afterCursor ? " AND (\(keyList)) > (\(columns.key.indices.map { columns.key[$0].bind("$\($0 + 3)") }.joined(separator: ", ")))" : ""
        return """
            SELECT ctid::text AS row_ref, \(columns.owner) AS owner, \(columns.clientId ?? "$2::text") AS client_id,
              \(columns.key.indices.map { "\(columns.key[$0].read) AS cursor_\($0)" }.joined(separator: ", ")),
              \(columns.keyId) AS key_id, \(columns.nonce) AS nonce, \(columns.ciphertext) AS ciphertext\(envelope ? ", \(columns.tenant ?? "NULL") AS tenant_id" : "")
            FROM \(columns.table) WHERE \(pending(columns, envelope: envelope))\(after) AND $2::text IS NOT NULL
            ORDER BY \(keyList) LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """
    }

    /// Whether the table's rows go under their tenant's data key (ADR 0017), not the ring.
    private func isEnvelope(_ columns: CiphertextColumns) -> Bool { cipher.dataKeys != nil && columns.tenant != nil }

    /// The condition of rows a rotation still has to do (`$1` the ring's first key id).
    package static func pending(_ columns: CiphertextColumns, envelope: Bool) -> String {
        envelope ? "\(columns.keyId) NOT LIKE 'dk.%' AND $1::text IS NOT NULL" : "\(columns.keyId) <> $1"
    }

    /// Rows of `columns` a rotation still has to do: under a ring key where the table's rows go to
    /// data keys, else not under the ring's first key.
    package func remaining(_ columns: CiphertextColumns) async throws -> Int {
        let primary = cipher.ring.primary.id
        let condition = Self.pending(columns, envelope: isEnvelope(columns))
        return try await database.run { connection in
            Int(try connection.query("SELECT count(*) AS n FROM \(columns.table) WHERE \(condition)", [.text(primary)]).rows.first?.int("n") ?? 0)
        }
    }

    /// Adds the encryptions counted in memory to `encryption_key_usage` (one statement, however
    /// many data keys were used). Counts that could not be written are kept for the next flush;
    /// with none counted, nothing is asked of the database.
    package func flushUsage() async throws {
        let counts = cipher.takeUnflushedCounts().sorted { $0.key < $1.key }
        guard !counts.isEmpty else { return }
        do {
            _ = try await database.run { connection in
                try connection.query(
                    """
                    INSERT INTO encryption_key_usage (key_id, encryptions) SELECT * FROM unnest($1::text[], $2::bigint[])
                    ON CONFLICT (key_id) DO UPDATE SET encryptions = encryption_key_usage.encryptions + EXCLUDED.encryptions, updated_at = now()
                    """,
                    [.text(APIKeyStore.arrayLiteral(counts.map(\.key))), .text(APIKeyStore.arrayLiteral(counts.map { String($0.value) }))])
            }
        } catch {
            cipher.restoreUnflushedCounts(Dictionary(uniqueKeysWithValues: counts))
            throw error
        }
    }

    /// The key in use with the most encryptions, those written to `encryption_key_usage` plus those
    /// this process counted and has not written yet: the ring's first key or a tenant's data key
    /// (those are what seal rows). One read, no write: readiness asks it on every probe
    /// (behaviour §8.1); the counts are written by ``flushUsage()`` every
    /// `TOKENRELAY_ISSUANCE_FLUSH_INTERVAL_S` and at shutdown.
    package func usage() async throws -> (keyId: String, encryptions: Int64)? {
        let primary = cipher.ring.primary.id
        let unflushed = cipher.unflushedCounts.filter { $0.key == primary || DataKey.isDataKeyId($0.key) }
        var totals = try await database.run { connection in
            try connection.query(
                """
                SELECT key_id, encryptions FROM encryption_key_usage WHERE key_id = ANY($2::text[])
                UNION (SELECT key_id, encryptions FROM encryption_key_usage WHERE key_id = $1 OR key_id LIKE 'dk.%'
                  ORDER BY encryptions DESC, key_id LIMIT 1)
                """, [.text(primary), .text(APIKeyStore.arrayLiteral(unflushed.keys.sorted()))]
            ).rows.reduce(into: [String: Int64]()) { totals, row in totals[row.string("key_id") ?? ""] = row.int("encryptions") ?? 0 }
        }
        for (keyId, count) in unflushed { totals[keyId, default: 0] += count }
        return totals.min { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.map { ($0.key, $0.value) }
    }
}
