import Foundation
import PostgresBridge

/// A stored API key (SPEC §7): only the SHA-256 of its secret is kept.
struct APIKeyRecord: Sendable {
    let keyId: String
    let name: String
    let secretHash: [UInt8]
    let permissions: [Permission]
    let createdAt: String
    let revokedAt: String?
}

/// SQL for API keys.
struct APIKeyStore: Sendable {
    let database: Database

    /// The active (not revoked) key `keyId`, or nil.
    func activeKey(_ keyId: String) async throws -> APIKeyRecord? {
        try await database.run { connection in
            try connection.query("\(Self.select) WHERE key_id = $1 AND revoked_at IS NULL", [.text(keyId)]).rows.first.map(Self.record)
        }
    }

    func all() async throws -> [APIKeyRecord] {
        try await database.run { connection in
            try connection.query("\(Self.select) ORDER BY created_at, key_id").rows.map(Self.record)
        }
    }

    func insert(keyId: String, name: String, secretHash: [UInt8], permissions: [Permission]) async throws {
        let list = "{" + permissions.map(\.rawValue).joined(separator: ",") + "}"
        _ = try await database.run { connection in
            try connection.query(
                "INSERT INTO api_keys (key_id, name, secret_hash, permissions) VALUES ($1, $2, $3, $4::text[])",
                [.text(keyId), .text(name), .bytes(secretHash), .text(list)]
            ).affectedRows
        }
    }

    /// Returns whether an active key was revoked.
    func revoke(_ keyId: String) async throws -> Bool {
        try await database.run { connection in
            // One statement (its own transaction): every replica drops the key when it commits.
            try connection.query(
                """
                WITH revoked AS (UPDATE api_keys SET revoked_at = now() WHERE key_id = $1 AND revoked_at IS NULL RETURNING key_id)
                SELECT pg_notify($2, $3 || key_id || ' ' || $4) FROM revoked
                """,
                [.text(keyId), .text(ReplicaNotifications.channel), .text(ReplicaInvalidation.Message.apiKeyRevokedPrefix), .text(ReplicaInvalidation.origin)]
            ).rows.count > 0
        }
    }

    private static let select = """
        SELECT key_id, name, secret_hash, array_to_string(permissions, ',') AS permissions,
          to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS created_at,
          to_char(revoked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS revoked_at
        FROM api_keys
        """

    private static func record(_ row: PostgresRow) -> APIKeyRecord {
        APIKeyRecord(
            keyId: row.string("key_id") ?? "", name: row.string("name") ?? "", secretHash: row.bytes("secret_hash") ?? [],
            permissions: (row.string("permissions") ?? "").split(separator: ",").compactMap { Permission(rawValue: String($0)) },
            createdAt: row.string("created_at") ?? "", revokedAt: row.string("revoked_at"))
    }
}
