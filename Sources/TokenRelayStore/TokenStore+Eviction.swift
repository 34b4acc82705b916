import IdentityCore
import PostgresBridge
import TokenRelayBase

extension TokenStore {
    /// Deletes the cached access token a resource rejected with a claims challenge (behaviour §6), unless
    /// another request has already replaced it (its `expires_on` then differs), and tells every
    /// replica to drop the account's access tokens from memory (`tokens.replaced`, delivered at
    /// COMMIT), so no replica serves the refused token again, even when no new token follows
    /// (the re-acquisition needed interaction; case 19: a refused token kept in a cache until its
    /// `exp` is an outage until then).
    package func evictAccessToken(_ token: StoredAccessToken) async throws {
        let target = ScopeSet(normalizing: token.scopes).cacheKey
        let clientId = self.clientId
        _ = try await database.transaction { connection in
            let deleted = try connection.query(
                """
                DELETE FROM access_tokens WHERE account_id = $1 AND environment = $2 AND realm = $3 AND client_id = $4 AND target = $5
                  AND expires_on = $6
                """,
                [.text(token.accountId), .text(token.environment), .text(token.realm), .text(clientId), .text(target), .int(Int64(token.expiresOn))]
            ).affectedRows
            // Sent even when the row was gone already: another replica may hold the token in memory only.
            try ReplicaNotifications.send(.accessTokensReplaced(token.accountId), in: connection)
            return deleted
        }
    }
}
