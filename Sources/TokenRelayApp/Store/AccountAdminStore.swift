import IdentityCore
import PostgresBridge

/// Account reads and deletions for `token-relay accounts` (SPEC §8): the same rows and account
/// objects as the API, across every client id unless one is configured.
struct AccountAdminStore: Sendable {
    let database: Database
    /// Only this client's accounts when set (`TOKENRELAY_CLIENT_ID`).
    let clientId: String?

    /// One page ordered by `account_id`, starting after `afterAccountId`.
    func list(username: String?, tenantId: String?, afterAccountId: String?, limit: Int) async throws -> [AccountRecord] {
        let clientId = self.clientId
        return try await database.run { connection in
            try connection.query(
                """
                SELECT \(TokenStore.accountColumns) FROM accounts
                WHERE ($1::text IS NULL OR client_id = $1)
                  AND ($2::text IS NULL OR lower(username) = lower($2))
                  AND ($3::text IS NULL OR \(TokenStore.inTenant("$3")))
                  AND ($4::text IS NULL OR account_id > $4)
                ORDER BY account_id LIMIT $5
                """,
                [
                    TokenStore.optional(clientId), TokenStore.optional(username), TokenStore.optional(tenantId), TokenStore.optional(afterAccountId),
                    .int(Int64(limit)),
                ]
            ).rows.map(TokenStore.account(from:))
        }
    }

    /// The account `id` names: itself, or the survivor a merged import's id stands for (as the API).
    func account(id: String) async throws -> AccountRecord? {
        let clientId = self.clientId
        return try await database.run { connection in
            try connection.query(
                "SELECT \(TokenStore.accountColumns) FROM accounts WHERE account_id = \(TokenStore.resolvedAccountId) AND ($2::text IS NULL OR client_id = $2)",
                [.text(id), TokenStore.optional(clientId)]
            ).rows.first.map(TokenStore.account(from:))
        }
    }

    /// Deletes the account and its tokens with its `account.deleted` event and audit row, all in
    /// one transaction. Returns whether the account existed.
    func delete(id: String, actor: String) async throws -> Bool {
        let clientId = self.clientId
        return try await database.transaction { connection in
            let deleted = try TokenStore.deleteAccount(in: connection, id: id, clientId: clientId, actor: actor)
            try AuditStore.record(in: connection, .accountDeleted, actor: actor, accountId: id, outcome: deleted ? "deleted" : "absent")
            return deleted
        }
    }
}
