import Foundation
import PostgresBridge
import TokenRelayBase

/// A stored API key (behaviour §7): only the SHA-256 of its secret is kept.
package struct APIKeyRecord: Sendable {
    package let keyId: String
    package let name: String
    package let secretHash: [UInt8]
    package let permissions: [Permission]
    /// Allowed tenants; empty = every tenant.
    package let tenants: [String]
    /// Allowed scope globs; empty = every scope.
    package let scopePatterns: [String]
    package let createdAt: String
    package let revokedAt: String?
}

/// SQL for API keys.
package struct APIKeyStore: Sendable {
    package let database: Database

    package init(database: Database) {
        self.database = database
    }

    /// The active (not revoked) key `keyId`, or nil.
    package func activeKey(_ keyId: String) async throws -> APIKeyRecord? {
        try await database.run { connection in
            try connection.query("\(Self.select) WHERE key_id = $1 AND revoked_at IS NULL", [.text(keyId)]).rows.first.map(Self.record)
        }
    }

    package func all() async throws -> [APIKeyRecord] {
        try await database.run { connection in
            try connection.query("\(Self.select) ORDER BY created_at, key_id").rows.map(Self.record)
        }
    }

    package func insert(
        keyId: String, name: String, secretHash: [UInt8], permissions: [Permission], tenants: [String] = [], scopePatterns: [String] = []
    ) async throws {
        _ = try await database.run { connection in
            // One statement: every replica's key directory learns the id when it commits
            // (``KeyDirectory``), so the new key is not refused as unknown.
            try connection.query(
                """
                WITH created AS (
                  INSERT INTO api_keys (key_id, name, secret_hash, permissions, tenants, scope_patterns)
                  VALUES ($1, $2, $3, $4::text[], $5::text[], $6::text[]) RETURNING key_id)
                SELECT pg_notify($7, $8 || key_id || ' ' || $9) FROM created
                """,
                [
                    .text(keyId), .text(name), .bytes(secretHash), .text(Self.arrayLiteral(permissions.map(\.rawValue))),
                    .text(Self.arrayLiteral(tenants)), .text(Self.arrayLiteral(scopePatterns)), .text(ReplicaNotifications.channel),
                    .text(ReplicaNotifications.Message.apiKeyCreatedPrefix), .text(ReplicaNotifications.origin),
                ]
            ).rows.count
        }
    }

    /// The ids of active keys, at most `limit` (for ``KeyDirectory``).
    package func activeKeyIds(limit: Int) async throws -> [String] {
        try await database.run { connection in
            try connection.query("SELECT key_id FROM api_keys WHERE revoked_at IS NULL LIMIT $1", [.int(Int64(limit))]).rows.compactMap {
                $0.string("key_id")
            }
        }
    }

    /// A PostgreSQL array literal of `items`, each quoted (patterns may hold `,`, `*`, `"`).
    package static func arrayLiteral(_ items: [String]) -> String {
        "{" + items.map { "\"" + $0.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\"" }.joined(separator: ",")
            + "}"
    }

    /// Returns whether an active key was revoked.
    package func revoke(_ keyId: String) async throws -> Bool {
        try await database.run { connection in
            // One statement (its own transaction): every replica drops the key when it commits.
            try connection.query(
                """
                WITH revoked AS (UPDATE api_keys SET revoked_at = now() WHERE key_id = $1 AND revoked_at IS NULL RETURNING key_id)
                SELECT pg_notify($2, $3 || key_id || ' ' || $4) FROM revoked
                """,
                [
                    .text(keyId), .text(ReplicaNotifications.channel), .text(ReplicaNotifications.Message.apiKeyRevokedPrefix),
                    .text(ReplicaNotifications.origin),
                ]
            ).rows.count > 0
        }
    }

    private static let select = """
        SELECT key_id, name, secret_hash, array_to_string(permissions, ',') AS permissions,
          array_to_json(tenants)::text AS tenants, array_to_json(scope_patterns)::text AS scope_patterns,
          to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS created_at,
          to_char(revoked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS revoked_at
        FROM api_keys
        """

    private static func record(_ row: PostgresRow) -> APIKeyRecord {
        APIKeyRecord(
            keyId: row.string("key_id") ?? "", name: row.string("name") ?? "", secretHash: row.bytes("secret_hash") ?? [],
            permissions: (row.string("permissions") ?? "").split(separator: ",").compactMap { Permission(rawValue: String($0)) },
            tenants: strings(row.string("tenants")), scopePatterns: strings(row.string("scope_patterns")),
            createdAt: row.string("created_at") ?? "", revokedAt: row.string("revoked_at"))
    }

    /// A JSON array of strings as read from `array_to_json(...)::text`.
    private static func strings(_ json: String?) -> [String] {
        guard let json, let items = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String] else { return [] }
        return items
    }
}
