import CryptoBridge
import IdentityCore
import PostgresBridge
import TokenRelayBase

/// The refresh engine's statements (ADR 0012): a claim and a fenced write, each one autocommit
/// call of a function of migration 0010 (one round trip, nothing held between them; PL/pgSQL
/// plans their inner statements once per connection), so a refresh holds no connection,
/// transaction or lock while the STS answers, and works through pgbouncer in transaction mode.
extension TokenStore: RefreshTokenStore {
    package func claimRefresh(_ claim: RefreshClaimRequest) async throws -> RefreshClaim {
        let clientId = self.clientId
        let row = try await database.run { connection in
            try connection.query(Self.claimStatement, claim.parameters(clientId: clientId)).rows.first
        }
        guard let row else { throw RelayError(.internal, "The refresh claim returned no row.") }
        if let generation = row.int("claimed_generation") {
            do {
                let token = try await cipher.open(
                    loading: SealedSecret(row: row), for: SealingContext(owner: claim.accountId, kind: .refreshToken, clientId: clientId))
                return .claimed(token: token, generation: generation, takenOverFrom: row.string("taken_over_from"))
            } catch {
                // Never sent: a key missing from the ring, or a ciphertext moved from another row.
                try? await releaseRefreshLease(accountId: claim.accountId, owner: claim.owner)
                var problem = RelayError(.internal, "The stored refresh token of this account could not be decrypted; see the service log.")
                problem.cause = "token.decrypt_failed: kind=rt account.id=\(claim.accountId): \(error)"
                throw problem
            }
        }
        if row.bool("fresh") == true { return .freshTokenStored }
        guard row.bool("has_token") == true else { return .noRefreshToken }
        let secondsLeft = row.string("lease_seconds_left").flatMap(Double.init) ?? 0
        return .heldElsewhere(secondsLeft: max(0, secondsLeft))
    }

    /// One call (migrations 0010 and 0021, `tokenrelay_claim_refresh`): the cache check (`fresh`),
    /// the lease claim (only when the lease is free or expired, and no usable token is stored; the
    /// expired lease's owner in `taken_over_from`), and what the row holds when it could not be claimed.
    private static let claimStatement = """
        SELECT key_id, nonce, ciphertext, claimed_generation, fresh, has_token, lease_seconds_left::text AS lease_seconds_left, taken_over_from
        FROM tokenrelay_claim_refresh($1::text, $2::text, $3::text, $4::text, $5::bool, $6::text, $7::int8, $8::bool, $9::int8, $10::text, $11::float8)
        """

    package func writeRotation(_ write: RotationWrite) async throws -> RotationWriteOutcome {
        try await database.run { connection in try self.writeRotation(in: connection, write) }
    }

    /// ``writeRotation(_:)`` inside a caller's transaction (an import's first redemption
    /// completes the account in the same transaction).
    package func writeRotation(in connection: PostgresConnection, _ write: RotationWrite) throws -> RotationWriteOutcome {
        let clientId = self.clientId
        let sealedRefresh = try write.rotatedRefreshToken.map {
            try cipher.seal($0, for: SealingContext(owner: write.accountId, kind: .refreshToken, clientId: clientId, tenantId: write.tenantId))
        }
        let sealedAccess = try write.accessToken.map {
            try cipher.seal($0.secret, for: SealingContext(owner: write.accountId, kind: .accessToken, clientId: clientId, tenantId: $0.realm))
        }
        var parameters: [PostgresParameter] = [
            .text(write.accountId), .text(clientId), .int(write.generation), TokenStore.optional(sealedRefresh?.keyId),
            sealedRefresh.map { .bytes($0.nonce) } ?? .null, sealedRefresh.map { .bytes($0.ciphertext) } ?? .null, TokenStore.optional(write.familyId),
            .text(write.redeemedFingerprint), TokenStore.optional(write.rotatedRefreshToken.map(Self.lineageDigest)),
            .text(ReplicaNotifications.channel), .text(ReplicaNotifications.Message.refreshReleased(write.accountId).payload),
            write.notifyAccessTokensReplaced ? .text(ReplicaNotifications.Message.accessTokensReplaced(write.accountId).payload) : .null,
        ]
        // The access token's scopes normalised once, for its entry and its provenance.
        let target = write.accessToken.map { write.accessTokenScopes ?? ScopeSet(normalizing: $0.scopes) }
        if let token = write.accessToken, let sealedAccess, let target {
            parameters += [
                .text(token.environment), .text(token.realm), .text(target.cacheKey), .text(target.canonical.joined(separator: " ")),
                .text(sealedAccess.keyId), .bytes(sealedAccess.nonce), .bytes(sealedAccess.ciphertext), .int(Int64(token.expiresOn)),
                token.extExpiresOn.map { .int(Int64($0)) } ?? .null, token.refreshOn.map { .int(Int64($0)) } ?? .null,
            ]
        } else {
            parameters += Array(repeating: .null, count: 10)
        }
        parameters += TokenProvenance.parameters(of: write.accessToken, target: target)
        let row = try connection.query(Self.rotationStatement, parameters).rows.first
        if let generation = row?.int("stored_generation") { return .stored(generation: generation) }
        if row?.bool("already_stored") == true { return .alreadyStored }
        return .fencedOut
    }

    /// The fenced write (migration 0010, `tokenrelay_store_rotation`): the refresh token row
    /// changes only if it is still at the generation that was redeemed (`$3`); then the lineage
    /// gains a link, the access token (`$13`…`$22`, all null for the refresh token alone) replaces
    /// the entries it overlaps, the lease is released and waiters are notified. Without a rotated
    /// token (`$4` null) the row keeps its token and generation. `already_stored` tells a retry that
    /// an earlier attempt, whose answer was lost with the connection, did commit this same rotation:
    /// the link after `$3` replaced the redeemed token (`$8`) with this answer's token (`$9`). The
    /// replaced fingerprint alone is not enough: after a lease takeover, the other redemption of the
    /// same token stored a link with the same `$8` (and its own token), and that is a fenced-out write.
    /// The access token's provenance (`$23`…`$27`, ``TokenProvenance``) is recorded whether or not
    /// the write is fenced out: the token was obtained and is served either way.
    private static let rotationStatement = """
        WITH \(TokenProvenance.cte(first: 23))
        SELECT stored_generation, already_stored FROM tokenrelay_store_rotation(
          $1::text, $2::text, $3::int8, $4::text, $5::bytea, $6::bytea, $7::text, $8::text, $9::text, $10::text, $11::text, $12::text,
          $13::text, $14::text, $15::text, $16::text, $17::text, $18::bytea, $19::bytea, $20::int8, $21::int8, $22::int8)
        """

    package func releaseRefreshLease(accountId: String, owner: String) async throws {
        let clientId = self.clientId
        _ = try await database.run { connection in
            try connection.query(
                """
                WITH released AS (
                  UPDATE refresh_tokens SET lease_owner = NULL, lease_expires_at = NULL
                  WHERE account_id = $1 AND client_id = $2 AND lease_owner = $3)
                SELECT pg_notify($4, $5)
                """,
                [
                    .text(accountId), .text(clientId), .text(owner), .text(ReplicaNotifications.channel),
                    .text(ReplicaNotifications.Message.refreshReleased(accountId).payload),
                ])
        }
    }

    /// One plain statement, run only by a redemption longer than the renewal interval (a third of
    /// the lease), so it is not worth a function of its own. Fenced on `owner`, unique to one
    /// claim: a late renewal never extends a lease someone else took, nor revives a released one.
    package func renewRefreshLease(accountId: String, owner: String, leaseSeconds: Double) async throws -> Bool {
        let clientId = self.clientId
        return try await database.run { connection in
            try connection.query(
                """
                UPDATE refresh_tokens SET lease_expires_at = now() + make_interval(secs => $4::float8)
                WHERE account_id = $1 AND client_id = $2 AND lease_owner = $3 RETURNING 1 AS renewed
                """,
                [.text(accountId), .text(clientId), .text(owner), .text(String(leaseSeconds))]
            ).rows.first != nil
        }
    }

    package func markRefreshTokenDead(accountId: String, generation: Int64, stsErrorCodes: [Int]) async throws -> Bool {
        try await database.transaction { connection in
            let marked = try self.markRefreshTokenDead(in: connection, accountId: accountId, generation: generation, stsErrorCodes: stsErrorCodes)
            try ReplicaNotifications.send(.refreshReleased(accountId), in: connection)
            return marked
        }
    }

    /// The lineage's last links, newest first (`token-relay accounts show`).
    package func refreshTokenLineage(accountId: String, limit: Int = 10) async throws -> [LineageLink] {
        let clientId = self.clientId
        return try await database.run { connection in
            try Self.refreshTokenLineage(in: connection, accountId: accountId, clientId: clientId, limit: limit)
        }
    }

    /// ``refreshTokenLineage(accountId:limit:)`` on a caller's connection, for any client id
    /// (`AccountAdminStore` reads it without a key ring: fingerprints only, nothing to open).
    package static func refreshTokenLineage(in connection: PostgresConnection, accountId: String, clientId: String, limit: Int = 10) throws -> [LineageLink] {
        try connection.query(
            """
            SELECT generation, fingerprint, replaced_fingerprint, cause,
              to_char(recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS recorded_at
            FROM refresh_token_lineage WHERE account_id = $1 AND client_id = $2 ORDER BY generation DESC LIMIT $3
            """,
            [.text(accountId), .text(clientId), .int(Int64(limit))]
        ).rows.map { row in
            LineageLink(
                generation: row.int("generation") ?? 0, fingerprint: row.string("fingerprint") ?? "",
                replacedFingerprint: row.string("replaced_fingerprint"), cause: row.string("cause") ?? "", recordedAt: row.string("recorded_at") ?? "")
        }
    }

    /// The first 16 hex digits of SHA-256 of `token`: names a link of the chain without
    /// revealing anything usable of the token.
    package static func lineageDigest(_ token: String) -> String {
        SealedSecret.hex(Array(SHA256.hash(Array(token.utf8)).prefix(8)))
    }
}

/// One link of an account's refresh-token chain.
package struct LineageLink: Sendable, Equatable {
    package let generation: Int64
    package let fingerprint: String
    /// The link it replaced; nil when a sign-in or import started the chain.
    package let replacedFingerprint: String?
    /// `rotation`, `sign_in` or `import`.
    package let cause: String
    /// RFC 3339 UTC.
    package let recordedAt: String

    /// As `token-relay accounts show` prints it.
    package var json: JSONValue {
        .object([
            "generation": .number(Double(generation)), "fingerprint": .string(fingerprint),
            "replaced_fingerprint": replacedFingerprint.map(JSONValue.string) ?? .null, "cause": .string(cause), "recorded_at": .string(recordedAt),
        ])
    }
}

extension RefreshClaimRequest {
    package func parameters(clientId: String) -> [PostgresParameter] {
        [
            .text(accountId), .text(clientId), .text(environment), .text(realm), .bool(checkCache), .text(scopes.cacheKey),
            .int(Int64(minimumExpiresOn)), .bool(acceptRefreshDue), .int(Int64(now)), .text(owner), .text(String(leaseSeconds)),
        ]
    }
}
