import IdentityCore
import PostgresBridge
import TokenRelayBase

/// App (client credentials) and on-behalf-of token rows (migration 0005). Owners are
/// `app:{tenant}` and `obo:{sha256}`; ciphertexts are sealed for (owner, kind, client_id) like
/// every other token, so a row moved to another owner does not open.
extension TokenStore {
    /// The owner's cached access tokens in (environment, realm); rows that no longer open are skipped.
    package func grantAccessTokens(owner: String, environment: String, realm: String) async throws -> [StoredAccessToken] {
        let clientId = self.clientId
        return try await database.run { connection in
            try connection.query(
                """
                SELECT scopes, key_id, nonce, ciphertext, expires_on, ext_expires_on, refresh_on FROM grant_access_tokens
                WHERE owner = $1 AND environment = $2 AND realm = $3 AND client_id = $4
                """,
                [.text(owner), .text(environment), .text(realm), .text(clientId)]
            ).rows.compactMap { row in try self.accessToken(in: row, owner: owner, environment: environment, realm: realm) }
        }
    }

    /// Stores an app or OBO access token (`token.accountId` is the owner) under its granted scopes,
    /// with its provenance (``TokenProvenance``).
    /// - Parameter ownerExpiresOn: for OBO, the assertion's `exp` (unix seconds): the row is
    ///   purged after it.
    package func saveGrantAccessToken(_ token: StoredAccessToken, ownerExpiresOn: Int?) async throws {
        let target = ScopeSet(normalizing: token.scopes)
        let sealed = try await cipher.seal(
            loading: token.secret, for: SealingContext(owner: token.accountId, kind: .accessToken, clientId: clientId, tenantId: token.realm))
        let row: [PostgresParameter] = [
            .text(token.accountId), .text(token.environment), .text(token.realm), .text(clientId), .text(target.cacheKey),
            .text(target.canonical.joined(separator: " ")), .text(sealed.keyId), .bytes(sealed.nonce), .bytes(sealed.ciphertext),
            .int(Int64(token.expiresOn)), token.extExpiresOn.map { .int(Int64($0)) } ?? .null, token.refreshOn.map { .int(Int64($0)) } ?? .null,
            ownerExpiresOn.map { .int(Int64($0)) } ?? .null,
        ]
        let parameters = row + TokenProvenance.parameters(of: token)
        _ = try await database.run { connection in
            try connection.query(
                """
                WITH \(TokenProvenance.cte(first: 14))
                INSERT INTO grant_access_tokens (owner, environment, realm, client_id, target, scopes, key_id, nonce, ciphertext,
                  expires_on, ext_expires_on, refresh_on, owner_expires_on)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
                ON CONFLICT (owner, environment, realm, client_id, target) DO UPDATE SET
                  scopes = EXCLUDED.scopes, key_id = EXCLUDED.key_id, nonce = EXCLUDED.nonce, ciphertext = EXCLUDED.ciphertext,
                  expires_on = EXCLUDED.expires_on, ext_expires_on = EXCLUDED.ext_expires_on, refresh_on = EXCLUDED.refresh_on,
                  owner_expires_on = EXCLUDED.owner_expires_on, cached_at = now()
                """, parameters)
        }
    }

    /// The OBO refresh token of `owner` in `environment`, or nil.
    package func oboRefreshToken(owner: String, environment: String) async throws -> String? {
        let clientId = self.clientId
        let cipher = self.cipher
        return try await database.run { connection in
            guard
                let row = try connection.query(
                    "SELECT key_id, nonce, ciphertext FROM obo_refresh_tokens WHERE owner = $1 AND environment = $2 AND client_id = $3",
                    [.text(owner), .text(environment), .text(clientId)]
                ).rows.first
            else { return nil }
            let sealed = SealedSecret(row: row)
            return try cipher.openIfPossible(sealed, for: SealingContext(owner: owner, kind: .refreshToken, clientId: clientId))
        }
    }

    /// Stores (replaces) the OBO refresh token of `owner`. Last writer wins: a lost one costs
    /// one more on-behalf-of exchange with the still-valid assertion, never an account.
    package func saveOBORefreshToken(owner: String, environment: String, realm: String, token: String, ownerExpiresOn: Int) async throws {
        let sealed = try await cipher.seal(loading: token, for: SealingContext(owner: owner, kind: .refreshToken, clientId: clientId, tenantId: realm))
        let parameters: [PostgresParameter] = [
            .text(owner), .text(environment), .text(realm), .text(clientId), .text(sealed.keyId), .bytes(sealed.nonce), .bytes(sealed.ciphertext),
            .int(Int64(ownerExpiresOn)),
        ]
        _ = try await database.run { connection in
            try connection.query(
                """
                INSERT INTO obo_refresh_tokens (owner, environment, realm, client_id, key_id, nonce, ciphertext, owner_expires_on)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                ON CONFLICT (owner, environment, client_id) DO UPDATE SET realm = EXCLUDED.realm, key_id = EXCLUDED.key_id,
                  nonce = EXCLUDED.nonce, ciphertext = EXCLUDED.ciphertext, owner_expires_on = EXCLUDED.owner_expires_on, updated_at = now()
                """, parameters)
        }
    }

    /// Forgets an OBO refresh token the STS refused.
    package func deleteOBORefreshToken(owner: String, environment: String) async throws {
        let clientId = self.clientId
        _ = try await database.run { connection in
            try connection.query(
                "DELETE FROM obo_refresh_tokens WHERE owner = $1 AND environment = $2 AND client_id = $3", [.text(owner), .text(environment), .text(clientId)])
        }
    }

    /// Deletes OBO rows whose assertion expired before `now` (unix seconds): nobody can present
    /// that assertion again. Returns the number of rows removed.
    @discardableResult
    package func purgeExpiredOnBehalfOfTokens(now: Int) async throws -> Int {
        try await database.transaction { connection in
            let tokens = try connection.query("DELETE FROM grant_access_tokens WHERE owner_expires_on < $1", [.int(Int64(now))]).affectedRows
            let refresh = try connection.query("DELETE FROM obo_refresh_tokens WHERE owner_expires_on < $1", [.int(Int64(now))]).affectedRows
            return tokens + refresh
        }
    }
}
