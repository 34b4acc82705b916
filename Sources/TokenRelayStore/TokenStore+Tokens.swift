import IdentityCore
import PostgresBridge
import TokenRelayBase

/// Token rows. The `in` functions run inside a caller's short transaction; each is one
/// statement. The refresh engine's own statements are in `TokenStore+Refresh.swift`.
extension TokenStore {
    /// Serialises refreshes of one (account, client_id) across replicas until the transaction
    /// ends. Transaction-scoped so it works through pgbouncer in transaction mode (behaviour §8).
    package static func lockRefresh(in connection: PostgresConnection, accountId: String, clientId: String) throws {
        _ = try connection.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 7))", [.text("refresh|\(accountId)|\(clientId)")])
    }

    package func accessTokens(in connection: PostgresConnection, accountId: String, environment: String, realm: String) throws -> [StoredAccessToken] {
        let rows = try connection.query(
            """
            SELECT target, scopes, key_id, nonce, ciphertext, expires_on, ext_expires_on, refresh_on FROM access_tokens
            WHERE account_id = $1 AND environment = $2 AND realm = $3 AND client_id = $4
            """,
            [.text(accountId), .text(environment), .text(realm), .text(clientId)]
        ).rows
        return try rows.compactMap { row in try accessToken(in: row, owner: accountId, environment: environment, realm: realm) }
    }

    /// The access token of `owner` in a row of `access_tokens` or `grant_access_tokens` (columns
    /// `scopes`, `key_id`, `nonce`, `ciphertext`, `expires_on`, `ext_expires_on`, `refresh_on`),
    /// or nil when the row no longer opens (key removed from the ring): a cache miss, not an error.
    /// - Throws: ``DataKeyNeeded`` when its data key is not in memory yet.
    package func accessToken(in row: PostgresRow, owner: String, environment: String, realm: String) throws -> StoredAccessToken? {
        guard let secret = try cipher.openIfPossible(SealedSecret(row: row), for: SealingContext(owner: owner, kind: .accessToken, clientId: clientId)) else {
            return nil
        }
        return StoredAccessToken(
            accountId: owner, environment: environment, realm: realm, clientId: clientId,
            scopes: (row.string("scopes") ?? "").split(separator: " ").map(String.init),
            secret: secret, expiresOn: Int(row.int("expires_on") ?? 0),
            extExpiresOn: row.int("ext_expires_on").map(Int.init), refreshOn: row.int("refresh_on").map(Int.init))
    }

    package func accessTokens(accountId: String, environment: String, realm: String) async throws -> [StoredAccessToken] {
        try await database.run { connection in
            try self.accessTokens(in: connection, accountId: accountId, environment: environment, realm: realm)
        }
    }

    /// Stores `token` under its granted scopes, replacing entries whose scopes it overlaps (as
    /// MSAL does), so a lookup by requested scopes finds the newest token; records its provenance
    /// (``TokenProvenance``) in the same statement.
    package func saveAccessToken(in connection: PostgresConnection, _ token: StoredAccessToken) throws {
        let target = ScopeSet(normalizing: token.scopes)
        try connection.query(
            """
            DELETE FROM access_tokens WHERE account_id = $1 AND environment = $2 AND realm = $3 AND client_id = $4
              AND target <> $5 AND string_to_array(target, ' ') && string_to_array($5, ' ')
            """,
            [.text(token.accountId), .text(token.environment), .text(token.realm), .text(clientId), .text(target.cacheKey)])
        let sealed = try cipher.seal(token.secret, for: SealingContext(owner: token.accountId, kind: .accessToken, clientId: clientId, tenantId: token.realm))
        _ = try connection.query(
            """
            WITH \(TokenProvenance.cte(first: 13))
            INSERT INTO access_tokens (account_id, environment, realm, client_id, target, scopes, key_id, nonce, ciphertext, expires_on, ext_expires_on, refresh_on)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
            ON CONFLICT (account_id, environment, realm, client_id, target) DO UPDATE SET
              scopes = EXCLUDED.scopes, key_id = EXCLUDED.key_id, nonce = EXCLUDED.nonce, ciphertext = EXCLUDED.ciphertext,
              expires_on = EXCLUDED.expires_on, ext_expires_on = EXCLUDED.ext_expires_on, refresh_on = EXCLUDED.refresh_on, cached_at = now()
            """,
            [
                .text(token.accountId), .text(token.environment), .text(token.realm), .text(clientId), .text(target.cacheKey),
                .text(target.canonical.joined(separator: " ")), .text(sealed.keyId), .bytes(sealed.nonce), .bytes(sealed.ciphertext),
                .int(Int64(token.expiresOn)), token.extExpiresOn.map { .int(Int64($0)) } ?? .null, token.refreshOn.map { .int(Int64($0)) } ?? .null,
            ] + TokenProvenance.parameters(of: token))
    }

    /// Why a chain of refresh tokens starts (`refresh_token_lineage.cause`).
    package enum LineageCause: String, Sendable {
        case signIn = "sign_in"
        case importToken = "import"
    }

    /// The account's refresh token and its generation, or nil when none is stored.
    package func refreshToken(in connection: PostgresConnection, accountId: String) throws -> (token: String, generation: Int64)? {
        guard
            let row = try connection.query(
                "SELECT key_id, nonce, ciphertext, generation FROM refresh_tokens WHERE account_id = $1 AND client_id = $2",
                [.text(accountId), .text(clientId)]
            ).rows.first
        else { return nil }
        let sealed = SealedSecret(row: row)
        let token: String
        do {
            token = try cipher.open(sealed, for: SealingContext(owner: accountId, kind: .refreshToken, clientId: clientId))
        } catch {
            // Never served, never sent: a key missing from the ring, or a ciphertext moved here
            // from another row (its additional data names another account, behaviour §7).
            var problem = RelayError(.internal, "The stored refresh token of this account could not be decrypted; see the service log.")
            problem.cause = "token.decrypt_failed: kind=rt key_id=\(sealed.keyId) account.id=\(accountId): \(error)"
            throw problem
        }
        return (token, row.int("generation") ?? 0)
    }

    /// Starts a new chain with a refresh token from a sign-in or an import (behaviour §3), replacing
    /// whatever is stored. The generation only ever grows for an account (a chain started after
    /// the old token died continues the count), so a redemption of an older generation that is
    /// still in flight is fenced out (ADR 0012); its lease is cleared so the new token can be
    /// redeemed at once.
    /// - Parameter tenantId: the account's `realm`, whose data key seals the token (ADR 0017).
    package func saveRefreshToken(
        in connection: PostgresConnection, accountId: String, tenantId: String, token: String, familyId: String?, cause: LineageCause
    ) throws {
        let sealed = try cipher.seal(token, for: SealingContext(owner: accountId, kind: .refreshToken, clientId: clientId, tenantId: tenantId))
        _ = try connection.query(
            """
            WITH saved AS (
              INSERT INTO refresh_tokens (account_id, client_id, key_id, nonce, ciphertext, family_id, generation)
              VALUES ($1, $2, $3, $4, $5, $6,
                      COALESCE((SELECT max(generation) FROM refresh_token_lineage WHERE account_id = $1 AND client_id = $2), 0) + 1)
              ON CONFLICT (account_id, client_id) DO UPDATE SET key_id = EXCLUDED.key_id, nonce = EXCLUDED.nonce,
                ciphertext = EXCLUDED.ciphertext, family_id = EXCLUDED.family_id,
                generation = GREATEST(refresh_tokens.generation, EXCLUDED.generation - 1) + 1, updated_at = now(),
                rotated_at = NULL, replaced_fingerprint = NULL, lease_owner = NULL, lease_expires_at = NULL
              RETURNING generation)
            INSERT INTO refresh_token_lineage (account_id, client_id, generation, fingerprint, replaced_fingerprint, cause)
            SELECT $1, $2, generation, $7, NULL, $8 FROM saved
            ON CONFLICT (account_id, client_id, generation) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,
              replaced_fingerprint = NULL, cause = EXCLUDED.cause, recorded_at = now()
            """,
            [
                .text(accountId), .text(clientId), .text(sealed.keyId), .bytes(sealed.nonce), .bytes(sealed.ciphertext), Self.optional(familyId),
                .text(Self.lineageDigest(token)), .text(cause.rawValue),
            ])
    }

    /// The STS said the refresh token is dead (expired, revoked, idle): delete it and put the
    /// whole account in `interaction_required` until a new sign-in (behaviour §2.2, §5).
    ///
    /// Only the refresh token that was sent (its `generation`, read under the lock) is deleted; if
    /// a newer one is stored, nothing changes. Returns whether the account was marked.
    @discardableResult
    package func markRefreshTokenDead(in connection: PostgresConnection, accountId: String, generation: Int64, stsErrorCodes: [Int] = []) throws -> Bool {
        let deleted = try connection.query(
            "DELETE FROM refresh_tokens WHERE account_id = $1 AND client_id = $2 AND generation = $3",
            [.text(accountId), .text(clientId), .int(generation)]
        ).affectedRows
        guard deleted == 1 else { return false }
        try connection.query("DELETE FROM access_tokens WHERE account_id = $1 AND client_id = $2", [.text(accountId), .text(clientId)])
        let marked = try connection.query(
            "UPDATE accounts SET state = 'interaction_required' WHERE account_id = $1 AND state <> 'interaction_required'", [.text(accountId)]
        ).affectedRows
        if marked == 1 {
            try AccountEventStore.append(
                in: connection, .interactionRequired, accountId: accountId,
                data: ["reason": .string("refresh_token_dead"), "sts_error_codes": .array(stsErrorCodes.map { .number(Double($0)) })])
        }
        try ReplicaNotifications.send(.accountChanged(accountId), in: connection)
        return true
    }
}
