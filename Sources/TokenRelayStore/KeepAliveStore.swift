import PostgresBridge
import TokenRelayBase

/// SQL of the refresh-token keep-alive job: which accounts to refresh, and with which scopes (its
/// lease is in `JobLeaseStore`).
///
/// "Last refreshed" is `refresh_tokens.updated_at`: it changes whenever the refresh token is
/// redeemed and rotated (or stored by a sign-in), which is what the STS's inactivity window
/// counts; `accounts.last_used_at` also moves on cache hits that never reach the STS.
package struct KeepAliveStore: Sendable {
    package let database: Database
    package let clientId: String

    package init(database: Database, clientId: String) {
        self.database = database
        self.clientId = clientId
    }

    /// Active accounts whose refresh token was last redeemed more than `days` ago, longest idle
    /// first; none of a suspended tenant (realm, home tenant or any tenant profile; behaviour §12 Tenants).
    package func idleAccountIds(olderThanDays days: Int, limit: Int) async throws -> [String] {
        let clientId = self.clientId
        return try await database.run { connection in
            try connection.query(
                """
                SELECT a.account_id FROM refresh_tokens r JOIN accounts a ON a.account_id = r.account_id
                WHERE r.client_id = $1 AND a.state = 'active' AND r.updated_at < now() - make_interval(days => $2::int)
                  AND NOT EXISTS (SELECT 1 FROM tenant_suspensions ts
                    WHERE ts.tenant_id IN (lower(a.realm), lower(split_part(a.home_account_id, '.', 2)))
                       OR ts.tenant_id IN (SELECT lower(tp.realm) FROM account_tenant_profiles tp WHERE tp.account_id = a.account_id))
                ORDER BY r.updated_at LIMIT $3
                """,
                [.text(clientId), .int(Int64(days)), .int(Int64(limit))]
            ).rows.compactMap { $0.string("account_id") }
        }
    }

    /// The canonical scopes of the account's most recently cached access token in `realm`
    /// (scopes the account already consented to), or nil when none is cached.
    package func recentScopes(accountId: String, realm: String) async throws -> [String]? {
        let clientId = self.clientId
        return try await database.run { connection in
            try connection.query(
                "SELECT scopes FROM access_tokens WHERE account_id = $1 AND client_id = $2 AND realm = $3 ORDER BY cached_at DESC LIMIT 1",
                [.text(accountId), .text(clientId), .text(realm)]
            ).rows.first?.string("scopes").map { $0.split(separator: " ").map(String.init) }
        }
    }

    /// Records a redemption whose response carried no new refresh token (the old one was still
    /// used), so the account is not picked again next pass.
    package func markRedeemed(accountId: String) async throws {
        let clientId = self.clientId
        _ = try await database.run { connection in
            try connection.query("UPDATE refresh_tokens SET updated_at = now() WHERE account_id = $1 AND client_id = $2", [.text(accountId), .text(clientId)])
        }
    }
}
