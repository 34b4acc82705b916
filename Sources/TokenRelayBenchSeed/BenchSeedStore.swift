import PostgresBridge
import TokenRelayBase
import TokenRelayStore

/// One seeded account's rows, sealed already (``BenchSeeder``): an account, its home tenant
/// profile, its refresh token with its first lineage link, and one cached access token.
package struct SeededAccount: Sendable {
    package let accountId: String
    package let homeAccountId: String
    package let realm: String
    package let localAccountId: String
    package let username: String
    package let name: String
    package let authority: String
    package let idTokenClaims: String
    package let refreshToken: SealedSecret
    package let refreshFingerprint: String
    package let target: String
    package let scopes: String
    package let accessToken: SealedSecret
    package let expiresOn: Int64
}

/// The SQL of `token-relay bench-seed` (bench/scale only): every table of a seeded batch in one
/// multi-row `INSERT … SELECT FROM unnest(…)` per table, all in one transaction, so a million
/// accounts cost a few hundred round trips, not millions. `ON CONFLICT DO NOTHING` everywhere:
/// a re-run, or a run resumed after an interruption, adds only what is missing.
package struct BenchSeedStore: Sendable {
    package let database: Database
    package let clientId: String

    package init(database: Database, clientId: String) {
        self.database = database
        self.clientId = clientId
    }

    /// Whether `accountId` is stored (a batch whose last account is stored is skipped on resume).
    package func exists(accountId: String) async throws -> Bool {
        try await database.run { connection in
            try connection.query("SELECT 1 FROM accounts WHERE account_id = $1", [.text(accountId)]).rows.first != nil
        }
    }

    /// Writes `batch` in one transaction. Returns the accounts that were new.
    /// - Parameter environment: the authority host (the cache partition) of every account.
    /// - Throws: `StoreError`.
    package func insert(_ batch: [SeededAccount], environment: String) async throws -> Int {
        func texts(_ pick: (SeededAccount) -> String) -> PostgresParameter { .text(APIKeyStore.arrayLiteral(batch.map(pick))) }
        func hex(_ pick: (SeededAccount) -> [UInt8]) -> PostgresParameter { texts { SealedSecret.hex(pick($0)) } }
        let client = PostgresParameter.text(clientId)
        let ids = texts(\.accountId), realms = texts(\.realm), oids = texts(\.localAccountId)
        let accounts: [PostgresParameter] = [
            client, .text(environment), ids, texts(\.homeAccountId), realms, oids, texts(\.username), texts(\.name), texts(\.authority),
            texts(\.idTokenClaims),
        ]
        let refreshTokens = [client, ids, texts(\.refreshToken.keyId), hex(\.refreshToken.nonce), hex(\.refreshToken.ciphertext)]
        let lineage = [client, ids, texts(\.refreshFingerprint)]
        let accessTokens: [PostgresParameter] = [
            .text(environment), client, ids, realms, texts(\.target), texts(\.scopes), texts(\.accessToken.keyId), hex(\.accessToken.nonce),
            hex(\.accessToken.ciphertext), texts { String($0.expiresOn) },
        ]
        return try await database.transaction { connection in
            let added = try connection.query(
                """
                INSERT INTO accounts (account_id, client_id, environment, home_account_id, realm, local_account_id, username, name, authority,
                  authority_type, id_token_claims)
                SELECT a, $1, $2, h, r, l, u, n, au, 'aad', c::jsonb
                FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[]) AS t(a, h, r, l, u, n, au, c)
                ON CONFLICT DO NOTHING
                """, accounts
            ).affectedRows
            try connection.query(
                """
                INSERT INTO account_tenant_profiles (account_id, realm, local_account_id, is_home)
                SELECT a, r, l, true FROM unnest($1::text[], $2::text[], $3::text[]) AS t(a, r, l)
                ON CONFLICT DO NOTHING
                """,
                [ids, realms, oids])
            try connection.query(
                """
                INSERT INTO refresh_tokens (account_id, client_id, key_id, nonce, ciphertext, generation)
                SELECT a, $1, k, decode(n, 'hex'), decode(c, 'hex'), 1 FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS t(a, k, n, c)
                ON CONFLICT DO NOTHING
                """, refreshTokens)
            try connection.query(
                """
                INSERT INTO refresh_token_lineage (account_id, client_id, generation, fingerprint, cause)
                SELECT a, $1, 1, f, 'sign_in' FROM unnest($2::text[], $3::text[]) AS t(a, f)
                ON CONFLICT DO NOTHING
                """, lineage)
            try connection.query(
                """
                INSERT INTO access_tokens (account_id, environment, realm, client_id, target, scopes, key_id, nonce, ciphertext, expires_on,
                  ext_expires_on)
                SELECT a, $1, r, $2, tg, s, k, decode(n, 'hex'), decode(c, 'hex'), e::int8, e::int8
                FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[]) AS t(a, r, tg, s, k, n, c, e)
                ON CONFLICT DO NOTHING
                """, accessTokens)
            return added
        }
    }
}
