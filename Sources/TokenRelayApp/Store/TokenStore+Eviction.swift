import IdentityCore
import PostgresBridge

extension TokenStore {
    /// Deletes the cached access token a resource rejected with a claims challenge (behaviour §6), unless
    /// another request has already replaced it (its `expires_on` then differs).
    func evictAccessToken(_ token: StoredAccessToken) async throws {
        let target = ScopeSet(normalizing: token.scopes).cacheKey
        let clientId = self.clientId
        _ = try await database.run { connection in
            try connection.query(
                """
                DELETE FROM access_tokens WHERE account_id = $1 AND environment = $2 AND realm = $3 AND client_id = $4 AND target = $5
                  AND expires_on = $6
                """,
                [.text(token.accountId), .text(token.environment), .text(token.realm), .text(clientId), .text(target), .int(Int64(token.expiresOn))]
            ).affectedRows
        }
    }
}
