import Foundation
import IdentityCore
import PostgresBridge
import TokenRelayBase

/// All SQL of TokenRelay: accounts, encrypted tokens, pending sign-ins. Routes and services call
/// these methods; nothing else writes SQL. Every statement is parameterised.
package struct TokenStore: Sendable {
    package let database: Database
    package let clientId: String
    package let cipher: TokenCipher

    package init(database: Database, clientId: String, cipher: TokenCipher) {
        self.database = database
        self.clientId = clientId
        self.cipher = cipher
    }

    package static let accountColumns = """
        account_id, client_id, environment, home_account_id, realm, local_account_id, username, name,
        authority, authority_type, state, id_token_claims::text AS id_token_claims,
        to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS created_at,
        to_char(last_used_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS last_used_at,
        (SELECT json_agg(json_build_object('realm', p.realm, 'local_account_id', p.local_account_id, 'is_home', p.is_home)
                         ORDER BY p.is_home DESC, p.realm)::text
           FROM account_tenant_profiles p WHERE p.account_id = accounts.account_id) AS tenant_profiles,
        (SELECT json_object_agg(x.owner, x.external_id)::text FROM account_external_ids x WHERE x.account_id = accounts.account_id) AS external_ids,
        CASE WHEN home_account_id IS NULL THEN imported_by END AS unconfirmed_importer
        """

    /// The account an id names: itself, or the survivor an imported account was merged into
    /// (behaviour §12 Accounts: the imported `account_id` stays valid as an alias).
    package static let resolvedAccountId = "COALESCE((SELECT a.account_id FROM account_aliases a WHERE a.alias_account_id = $1), $1)"

    /// The account a value given as `account_id` (in `$1`) names for a caller of the owner in
    /// the parameter `owner` (behaviour §3.7): an account id, else an import alias, else that
    /// owner's external id (a null owner has none). An account id always wins; external ids
    /// never have its shape.
    package static func resolvedAccountIdOrExternalId(owner: String) -> String {
        """
        COALESCE((SELECT a.account_id FROM account_aliases a WHERE a.alias_account_id = $1),
          (SELECT x.account_id FROM account_external_ids x WHERE x.owner = \(owner)::text AND x.external_id = $1
             AND NOT EXISTS (SELECT 1 FROM accounts y WHERE y.account_id = $1)), $1)
        """
    }

    // MARK: Accounts

    /// The account `id` names: an account id, an import alias, or (with `owner`) that owner's
    /// external id (behaviour §3.7, §12 Accounts).
    /// - Parameter owner: the caller's key name (``RequestContext/owner``); nil resolves account
    ///   ids and aliases only.
    package func account(id: String, owner: String? = nil) async throws -> AccountRecord? {
        let clientId = self.clientId
        return try await database.run { connection in
            try connection.query(Self.accountById, [.text(id), .text(clientId), Self.optional(owner)]).rows.first.map(Self.account(from:))
        }
    }

    /// The account `$1` names as an `account_id` (``resolvedAccountIdOrExternalId(owner:)``,
    /// with the owner in `$3`) of client `$2`: at most one row of ``accountColumns``.
    package static let accountById =
        "SELECT \(accountColumns) FROM accounts WHERE account_id = \(resolvedAccountIdOrExternalId(owner: "$3")) AND client_id = $2"

    /// ``accountById``'s account once per access token of its own environment and realm (the
    /// token columns null when it has none). The join names the token rows' owner as given (`$1`),
    /// so that the statement stays on one shard (behaviour §8.7) on `access_tokens_pkey`: an
    /// account `$1` names through an alias or an external id comes without tokens.
    package static let accountByIdWithAccessTokens = """
        WITH account AS (\(accountById))
        SELECT account.*, t.target, t.scopes, t.key_id, t.nonce, t.ciphertext, t.expires_on, t.ext_expires_on, t.refresh_on
        FROM account LEFT JOIN access_tokens t ON t.account_id = $1 AND account.account_id = $1
          AND t.environment = account.environment AND t.realm = account.realm AND t.client_id = $2
        """

    /// ``account(id:owner:)`` together with the account's stored access tokens in its own
    /// environment and realm, in one statement: a silent request whose token only PostgreSQL
    /// holds (after a restart, or dropped from memory) makes one round trip, not two (issue 13).
    ///
    /// The tokens are those ``accessTokens(accountId:environment:realm:)`` reads for
    /// (`account.environment`, `account.realm`), rows that no longer open left out. They are nil
    /// (not read) when `id` is an alias or an external id (``accountByIdWithAccessTokens``), and
    /// when a row's data key is not in memory: the separate read loads it, as before, and no
    /// error of loading it comes before the request's own checks.
    /// - Returns: nil when no account has that id.
    package func accountWithAccessTokens(id: String, owner: String? = nil) async throws -> (account: AccountRecord, accessTokens: [StoredAccessToken]?)? {
        let clientId = self.clientId
        return try await database.run { connection in
            let rows = try connection.query(Self.accountByIdWithAccessTokens, [.text(id), .text(clientId), Self.optional(owner)]).rows
            guard let first = rows.first else { return nil }
            let account = Self.account(from: first)
            guard account.accountId == id else { return (account, nil) }
            do {
                // A row with no token (the left join's nulls) has no target.
                let tokens = try rows.filter { $0.string("target") != nil }.compactMap { row in
                    try accessToken(in: row, owner: id, environment: account.environment, realm: account.realm)
                }
                return (account, tokens)
            } catch is DataKeyNeeded {
                return (account, nil)
            }
        }
    }

    /// The SQL expression every username comparison uses, for the text `expression` (a column or a
    /// parameter): ASCII letters folded to lower case, every other character kept as it is, as
    /// the identity platform compares user principal names (behaviour §12 Accounts). `lower()`
    /// under the database's collation is Unicode-aware (`İ` became `i̇`, the Kelvin sign `k`);
    /// under the "C" collation it changes ASCII letters only. The index
    /// `accounts_username_ascii_idx` is on this expression (migration 0019).
    package static func usernameKey(_ expression: String) -> String {
        "lower((\(expression)) COLLATE \"C\")"
    }

    /// The SQL condition that an account (alias `a`, none for the table itself) is seen by the key
    /// owner in parameter `owner`: any account whose user a redemption or sign-in confirmed
    /// (`home_account_id` set), an import of that owner, or one written before imports recorded
    /// their owner (behaviour §3.6). An import's username is only what its importer claimed: it
    /// must not make another owner's look-up ambiguous.
    package static func provenOr(_ owner: String, of a: String? = nil) -> String {
        let column = { (name: String) in a.map { "\($0).\(name)" } ?? name }
        return "(\(column("home_account_id")) IS NOT NULL OR \(column("imported_by")) IS NULL OR \(column("imported_by")) = \(owner)::text)"
    }

    /// Accounts matching a home_account_id, or a username (ASCII case-insensitive, ``usernameKey(_:)``) optionally narrowed
    /// to a tenant. More than one result means the caller must disambiguate (409).
    /// - Parameter owner: the caller's key owner: an import whose user no redemption has
    ///   confirmed yet is found by username only for the owner that imported it (behaviour §3.6).
    package func accounts(homeAccountId: String? = nil, username: String? = nil, tenantId: String? = nil, limit: Int = 10, owner: String? = nil) async throws
        -> [AccountRecord]
    {
        let clientId = self.clientId
        return try await database.run { connection in
            try connection.query(
                """
                SELECT \(Self.accountColumns) FROM accounts
                WHERE client_id = $1
                  AND ($2::text IS NULL OR home_account_id = $2)
                  AND ($3::text IS NULL OR (\(Self.usernameKey("username")) = \(Self.usernameKey("$3")) AND \(Self.provenOr("$6"))))
                  AND ($4::text IS NULL OR \(Self.inTenant("$4")))
                ORDER BY account_id LIMIT $5
                """,
                [
                    .text(clientId), Self.optional(homeAccountId), Self.optional(username), Self.optional(tenantId), .int(Int64(limit)),
                    Self.optional(owner),
                ]
            ).rows.map(Self.account(from:))
        }
    }

    /// One page of accounts ordered by `account_id`, starting after `afterAccountId`.
    /// - Parameter visibleTenants: lower-cased tenants an API key is limited to (`KeyAccess`); nil = every tenant.
    ///   Matches the realm, as `KeyAccess.tenants(of:)` does.
    /// - Parameter owner: the caller's key owner: an unconfirmed import of another owner is left out.
    package func listAccounts(
        username: String?, tenantId: String?, afterAccountId: String?, limit: Int, visibleTenants: [String]? = nil, owner: String? = nil,
        state: AccountRecord.State? = nil, failureClass: FailureClass? = nil
    ) async throws -> [AccountRecord] {
        let clientId = self.clientId
        return try await database.run { connection in
            try connection.query(
                Self.listAccountsStatement(tenant: tenantId != nil),
                [
                    .text(clientId), Self.optional(username), Self.optional(tenantId), Self.optional(afterAccountId), .int(Int64(limit)),
                    Self.optional(visibleTenants.map(APIKeyStore.arrayLiteral)), Self.optional(owner), Self.optional(state?.rawValue),
                    Self.optional(failureClass?.rawValue),
                ]
            ).rows.map(Self.account(from:))
        }
    }

    /// ``listAccounts(username:tenantId:afterAccountId:limit:visibleTenants:)``'s statement, with
    /// or without a tenant: `$1` client id, `$2` username, `$3` tenant id, `$4` cursor
    /// (exclusive), `$5` limit, `$6` the key's tenants (`text[]`), `$7` the key's owner (an
    /// unconfirmed import of another owner is left out), `$8` the state, `$9` the class of the
    /// current failure (behaviour §3.8); null leaves a filter out.
    package static func listAccountsStatement(tenant: Bool) -> String {
        accountPage(
            filters: { a in
                "\(a).client_id = $1 AND ($2::text IS NULL OR \(usernameKey("\(a).username")) = \(usernameKey("$2"))) AND ($6::text[] IS NULL OR \(inAnyTenant("$6", of: a))) AND \(provenOr("$7", of: a))"
                    + " AND ($8::text IS NULL OR \(a).state = $8::text) AND ($9::text IS NULL OR (\(a).last_failure_class = $9::text AND \(failureIsCurrent(a))))"
            }, tenant: "$3", byTenant: tenant, after: "$4", limit: "$5")
    }

    /// Removes the account and, by cascade, every token it owns, with its `account.deleted`
    /// event in the same transaction. Returns whether a row went.
    @discardableResult
    package func deleteAccount(id: String, actor: String? = nil) async throws -> Bool {
        let clientId = self.clientId
        return try await database.transaction { connection in
            try Self.deleteAccount(in: connection, id: id, clientId: clientId, actor: actor)
        }
    }

    /// The deletion inside a caller's transaction; `clientId` nil matches any client (the CLI).
    package static func deleteAccount(in connection: PostgresConnection, id: String, clientId: String?, actor: String?) throws -> Bool {
        guard
            let row = try connection.query(
                // An imported account's id may be an alias of the account it merged into.
                "DELETE FROM accounts WHERE account_id = \(resolvedAccountId) AND ($2::text IS NULL OR client_id = $2) RETURNING account_id, realm",
                [.text(id), optional(clientId)]
            ).rows.first
        else { return false }
        try AccountEventStore.append(
            in: connection, .deleted, accountId: row.string("account_id") ?? id, realm: row.string("realm"),
            data: actor.map { ["actor": .string($0)] } ?? [:])
        // Every replica forgets the account when this commits (behaviour §12).
        try ReplicaNotifications.send(.accountDeleted(row.string("account_id") ?? id), in: connection)
        return true
    }

    /// Writes `last_used_at` at most once per 5 minutes (behaviour §12 Accounts).
    package func touch(accountId: String) async throws {
        _ = try await database.run { connection in
            try connection.query(
                "UPDATE accounts SET last_used_at = now() WHERE account_id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '5 minutes')",
                [.text(accountId)]
            )
        }
    }

    /// The SQL condition "the account has a profile in tenant `parameter`" (behaviour §12: `tenant_id`
    /// filters match any profile of a guest). A per-row check: for a few rows (a username's);
    /// a page of a whole tenant is ``accountPage(filters:tenant:byTenant:after:limit:)``.
    package static func inTenant(_ parameter: String) -> String {
        """
        (lower(realm) = lower(\(parameter)::text) OR EXISTS (SELECT 1 FROM account_tenant_profiles tp
          WHERE tp.account_id = accounts.account_id AND lower(tp.realm) = lower(\(parameter)::text)))
        """
    }

    /// One page of accounts ordered by `account_id`: the rows of `accounts a` meeting
    /// `filters(a)` after the cursor `after`, and with `tenant` (a parameter; nil: any) only
    /// the accounts whose realm, or one of whose tenant profiles, is that tenant (behaviour §12).
    ///
    /// With a tenant, each side of the union walks its `lower(realm), account_id` index
    /// (migration 0015) from the cursor and stops after `limit` matches, so a page costs about
    /// a page, wherever it is and however small the tenant. The earlier `lower(realm) = … OR
    /// EXISTS (…)` filter could use no index: it walked every account after the cursor until
    /// the page filled (a page of a tenant holding 1 % of 100,000 accounts: 168 ms; issue 13).
    /// - Parameters:
    ///   - filters: SQL conditions on the accounts row named by the alias it is given.
    ///   - tenant: the parameter holding the tenant id; `byTenant` false: it is null, and only
    ///     referenced (libpq needs every bound parameter's type).
    ///   - after: the parameter holding the exclusive cursor (null: from the start).
    package static func accountPage(filters: (String) -> String, tenant: String, byTenant: Bool, after: String, limit: String) -> String {
        let cursor = { (alias: String) in "(\(after)::text IS NULL OR \(alias).account_id > \(after)::text)" }
        guard byTenant else {
            return """
                SELECT \(accountColumns) FROM accounts WHERE \(filters("accounts")) AND \(cursor("accounts")) AND \(tenant)::text IS NULL
                ORDER BY account_id LIMIT \(limit)
                """
        }
        return """
            SELECT \(accountColumns) FROM accounts WHERE account_id IN (
              (SELECT a.account_id FROM accounts a WHERE lower(a.realm) = lower(\(tenant)::text) AND \(cursor("a")) AND \(filters("a"))
                ORDER BY a.account_id LIMIT \(limit))
              UNION
              (SELECT t.account_id FROM account_tenant_profiles t JOIN accounts a ON a.account_id = t.account_id
                WHERE lower(t.realm) = lower(\(tenant)::text) AND \(cursor("t")) AND \(filters("a"))
                ORDER BY t.account_id LIMIT \(limit)))
            ORDER BY account_id LIMIT \(limit)
            """
    }

    /// SQL that is true when the row's `realm`, or a tenant profile of the row's account, is one
    /// of the lower-cased tenants in the `text[]` parameter (an API key's tenant limits, behaviour §12).
    /// - Parameter table: the table whose `account_id` and `realm` the row has.
    package static func inAnyTenant(_ parameter: String, of table: String = "accounts") -> String {
        """
        (lower(\(table).realm) = ANY(\(parameter)::text[]) OR EXISTS (SELECT 1 FROM account_tenant_profiles tp
          WHERE tp.account_id = \(table).account_id AND lower(tp.realm) = ANY(\(parameter)::text[])))
        """
    }

    // MARK: Mapping

    /// Reads the `external_ids` column (a JSON object owner → external id the store aggregates;
    /// null when the account has none).
    package static func externalIds(from text: String?) -> [String: String] {
        guard let text, case .object(let members)? = JSONValue.parse(text) else { return [:] }
        return members.compactMapValues(\.stringValue)
    }

    package static func optional(_ text: String?) -> PostgresParameter {
        text.map(PostgresParameter.text) ?? .null
    }

    package static func account(from row: PostgresRow) -> AccountRecord {
        AccountRecord(
            accountId: row.string("account_id") ?? "",
            clientId: row.string("client_id") ?? "",
            environment: row.string("environment") ?? "",
            homeAccountId: row.string("home_account_id"),
            realm: row.string("realm") ?? "",
            localAccountId: row.string("local_account_id"),
            username: row.string("username"),
            name: row.string("name"),
            authority: row.string("authority") ?? "",
            authorityType: AuthorityType(rawValue: row.string("authority_type") ?? "") ?? .aad,
            state: AccountRecord.State(rawValue: row.string("state") ?? "") ?? .active,
            idTokenClaims: row.string("id_token_claims") ?? "{}",
            createdAt: row.string("created_at") ?? "",
            lastUsedAt: row.string("last_used_at"),
            tenantProfiles: TenantProfile.list(from: row.string("tenant_profiles")),
            externalIds: externalIds(from: row.string("external_ids")),
            unconfirmedImporter: row.string("unconfirmed_importer")
        )
    }
}
