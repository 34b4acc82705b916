import IdentityCore
import PostgresBridge
import TokenRelayBase

/// Account reads and deletions for `token-relay accounts` (behaviour §8): the same rows and account
/// objects as the API, across every client id unless one is configured.
package struct AccountAdminStore: Sendable {
    package let database: Database
    /// Only this client's accounts when set (`TOKENRELAY_CLIENT_ID`).
    package let clientId: String?

    package init(database: Database, clientId: String?) {
        self.database = database
        self.clientId = clientId
    }

    /// One page ordered by `account_id`, starting after `afterAccountId`.
    package func list(username: String?, tenantId: String?, afterAccountId: String?, limit: Int) async throws -> [AccountRecord] {
        let clientId = self.clientId
        return try await database.run { connection in
            try connection.query(
                TokenStore.accountPage(
                    filters: { a in
                        "($1::text IS NULL OR \(a).client_id = $1) AND ($2::text IS NULL OR \(TokenStore.usernameKey("\(a).username")) = \(TokenStore.usernameKey("$2")))"
                    },
                    tenant: "$3", byTenant: tenantId != nil, after: "$4", limit: "$5"),
                [
                    TokenStore.optional(clientId), TokenStore.optional(username), TokenStore.optional(tenantId), TokenStore.optional(afterAccountId),
                    .int(Int64(limit)),
                ]
            ).rows.map(TokenStore.account(from:))
        }
    }

    /// The account `id` names: itself, or the survivor a merged import's id stands for (as the API).
    package func account(id: String) async throws -> AccountRecord? {
        let clientId = self.clientId
        return try await database.run { connection in
            try connection.query(
                "SELECT \(TokenStore.accountColumns) FROM accounts WHERE account_id = \(TokenStore.resolvedAccountId) AND ($2::text IS NULL OR client_id = $2)",
                [.text(id), TokenStore.optional(clientId)]
            ).rows.first.map(TokenStore.account(from:))
        }
    }

    /// The state of the account's refresh token and the last links of its chain (newest first),
    /// or nil when no refresh token is stored. Fingerprints only: nothing here opens a secret.
    package func refreshToken(of account: AccountRecord, lineageLimit: Int = 10) async throws -> RefreshTokenState? {
        try await database.run { connection in
            guard
                let row = try connection.query(
                    """
                    SELECT generation, family_id,
                      to_char(rotated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS rotated_at,
                      CASE WHEN lease_owner IS NOT NULL AND lease_expires_at > now()
                        THEN to_char(lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') END AS lease_expires_at
                    FROM refresh_tokens WHERE account_id = $1 AND client_id = $2
                    """,
                    [.text(account.accountId), .text(account.clientId)]
                ).rows.first
            else { return nil }
            let lineage = try TokenStore.refreshTokenLineage(
                in: connection, accountId: account.accountId, clientId: account.clientId, limit: lineageLimit)
            return RefreshTokenState(
                generation: row.int("generation") ?? 0, rotatedAt: row.string("rotated_at"), familyId: row.string("family_id"),
                leaseExpiresAt: row.string("lease_expires_at"), lineage: lineage)
        }
    }

    /// Deletes the account and its tokens with its `account.deleted` event and audit row, all in
    /// one transaction. Returns whether the account existed.
    package func delete(id: String, actor: String) async throws -> Bool {
        let clientId = self.clientId
        return try await database.transaction { connection in
            let deleted = try TokenStore.deleteAccount(in: connection, id: id, clientId: clientId, actor: actor)
            try AuditStore.record(in: connection, .accountDeleted, actor: actor, accountId: id, outcome: deleted ? "deleted" : "absent")
            return deleted
        }
    }
}

/// What `token-relay accounts show` prints of an account's refresh token (never the token).
package struct RefreshTokenState: Sendable, Equatable {
    package let generation: Int64
    /// When the STS last returned a new refresh token (RFC 3339 UTC); nil since the sign-in or import.
    package let rotatedAt: String?
    /// The wire field `foci`.
    package let familyId: String?
    /// When the redemption lease a replica holds now ends (RFC 3339 UTC); nil when none is held.
    package let leaseExpiresAt: String?
    /// Newest first.
    package let lineage: [LineageLink]

    package var json: JSONValue {
        .object([
            "generation": .number(Double(generation)),
            "rotated_at": rotatedAt.map(JSONValue.string) ?? .null,
            "family_id": familyId.map(JSONValue.string) ?? .null,
            "lease": leaseExpiresAt.map { .object(["state": .string("held"), "expires_at": .string($0)]) } ?? .null,
            "lineage": .array(lineage.map(\.json)),
        ])
    }
}
