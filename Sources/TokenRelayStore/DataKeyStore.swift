import PostgresBridge
import TokenRelayBase

/// A row of `data_keys` (migration 0017): a tenant's data key as stored, wrapped.
package struct WrappedDataKey: Sendable, Equatable {
    /// `dk.` and 24 hex digits: the `key_id` of every row sealed under this key.
    package let dataKeyId: String
    /// The customer tenant (a lower-cased GUID, or the tenant name a realm carries).
    package let tenantId: String
    /// ``KeyEncryptionKey/id`` of the key that wrapped it.
    package let kekId: String
    /// `nonce ‖ AES-256-GCM(data key) ‖ tag`.
    package let wrapped: [UInt8]

    package init(dataKeyId: String, tenantId: String, kekId: String, wrapped: [UInt8]) {
        self.dataKeyId = dataKeyId
        self.tenantId = tenantId
        self.kekId = kekId
        self.wrapped = wrapped
    }

    package init(row: PostgresRow) {
        self.init(
            dataKeyId: row.string("data_key_id") ?? "", tenantId: row.string("tenant_id") ?? "", kekId: row.string("kek_id") ?? "",
            wrapped: row.bytes("wrapped") ?? [])
    }

    /// What the wrapping authenticates besides the key: its id and tenant, so a wrapped key
    /// copied onto another tenant's row does not open.
    package var associatedData: [UInt8] { Self.associatedData(dataKeyId: dataKeyId, tenantId: tenantId) }

    package static func associatedData(dataKeyId: String, tenantId: String) -> [UInt8] {
        Array("tokenrelay.dk.v1|\(dataKeyId)|\(tenantId)".utf8)
    }
}

/// SQL of `data_keys` (ADR 0017). Every call is one short statement; the HSM is never called
/// while a connection is held (``TenantDataKeys`` wraps and unwraps between calls).
package struct DataKeyStore: Sendable {
    package let database: Database

    package init(database: Database) {
        self.database = database
    }

    package static let columns = "data_key_id, tenant_id, kek_id, wrapped"

    /// The tenant's data key, or nil when it has none (never had one, or was forgotten).
    package func find(tenantId: String) async throws -> WrappedDataKey? {
        try await database.run { connection in
            try connection.query("SELECT \(Self.columns) FROM data_keys WHERE tenant_id = $1", [.text(tenantId)]).rows.first.map(WrappedDataKey.init(row:))
        }
    }

    /// The data key of that id, or nil when it is gone (its tenant was forgotten).
    package func find(dataKeyId: String) async throws -> WrappedDataKey? {
        try await database.run { connection in
            try connection.query("SELECT \(Self.columns) FROM data_keys WHERE data_key_id = $1", [.text(dataKeyId)]).rows.first.map(WrappedDataKey.init(row:))
        }
    }

    /// Stores a new data key unless the tenant got one meanwhile (another replica, another request).
    /// - Returns: the tenant's data key as stored: `key`, or the one that was there first.
    package func insert(_ key: WrappedDataKey) async throws -> WrappedDataKey {
        try await database.run { connection in
            let stored = try connection.query(
                """
                WITH inserted AS (
                  INSERT INTO data_keys (data_key_id, tenant_id, kek_id, wrapped) VALUES ($1, $2, $3, $4)
                  ON CONFLICT (tenant_id) DO NOTHING RETURNING \(Self.columns))
                SELECT \(Self.columns) FROM inserted
                UNION ALL SELECT \(Self.columns) FROM data_keys WHERE tenant_id = $2 AND NOT EXISTS (SELECT 1 FROM inserted)
                """,
                [.text(key.dataKeyId), .text(key.tenantId), .text(key.kekId), .bytes(key.wrapped)]
            ).rows.first
            if let stored { return WrappedDataKey(row: stored) }
            // Another insert won while this one waited for its row: this statement's snapshot was
            // taken before the winner committed, so it sees neither row. A new statement (READ
            // COMMITTED: a new snapshot) sees the winner's.
            guard
                let winner = try connection.query("SELECT \(Self.columns) FROM data_keys WHERE tenant_id = $1", [.text(key.tenantId)]).rows.first
            else { throw RelayError(.internal, "The tenant's data key was neither stored nor found.") }
            return WrappedDataKey(row: winner)
        }
    }

    /// Up to `limit` data keys not wrapped by `kekId`, after `cursor` in id order.
    package func notWrappedBy(_ kekId: String, after cursor: String?, limit: Int) async throws -> [WrappedDataKey] {
        try await database.run { connection in
            try connection.query(
                "SELECT \(Self.columns) FROM data_keys WHERE kek_id <> $1 AND data_key_id > $2 ORDER BY data_key_id LIMIT $3",
                [.text(kekId), .text(cursor ?? ""), .int(Int64(limit))]
            ).rows.map(WrappedDataKey.init(row:))
        }
    }

    /// Replaces the wrapping of each key, only where it is still the wrapping that was read (a
    /// concurrent rewrap or forget wins).
    /// - Returns: keys rewrapped.
    package func replaceWrapping(_ rewrapped: [(old: WrappedDataKey, new: WrappedDataKey)]) async throws -> Int {
        guard !rewrapped.isEmpty else { return 0 }
        return try await database.transaction { connection in
            var changed = 0
            for (old, new) in rewrapped {
                changed += try connection.query(
                    "UPDATE data_keys SET kek_id = $2, wrapped = $3, rewrapped_at = now() WHERE data_key_id = $1 AND kek_id = $4 AND wrapped = $5",
                    [.text(old.dataKeyId), .text(new.kekId), .bytes(new.wrapped), .text(old.kekId), .bytes(old.wrapped)]
                ).affectedRows
            }
            return changed
        }
    }

    /// Data keys per key-encryption key id.
    package func countByKEK() async throws -> [String: Int] {
        try await database.run { connection in
            var counts: [String: Int] = [:]
            for row in try connection.query("SELECT kek_id, count(*) AS keys FROM data_keys GROUP BY kek_id").rows {
                counts[row.string("kek_id") ?? ""] = Int(row.int("keys") ?? 0)
            }
            return counts
        }
    }

    /// Data keys not wrapped by `kekId`, counted up to `cap` (readiness reads it on every probe:
    /// a bounded scan of the `(kek_id, data_key_id)` index, whatever the number of tenants).
    package func countNotWrappedBy(_ kekId: String, cap: Int = 10_000) async throws -> Int {
        try await database.run { connection in
            Int(
                try connection.query(
                    "SELECT count(*) AS n FROM (SELECT 1 FROM data_keys WHERE kek_id <> $1 LIMIT \(cap)) AS pending", [.text(kekId)]
                ).rows.first?.int("n") ?? 0)
        }
    }

    /// Deletes the tenant's data key inside a caller's transaction (crypto-shredding).
    /// - Returns: the id of the key deleted, nil when the tenant had none.
    package static func delete(in connection: PostgresConnection, tenantId: String) throws -> String? {
        try connection.query("DELETE FROM data_keys WHERE tenant_id = $1 RETURNING data_key_id", [.text(tenantId)]).rows.first?.string("data_key_id")
    }
}
