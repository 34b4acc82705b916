import IdentityCore
import PostgresBridge
import TokenRelayBase

/// What the first redemption of an imported refresh token taught about its account (from
/// `client_info` and the id_token; behaviour §3 import).
package struct LearnedIdentity: Sendable {
    package let environment: String
    package let homeAccountId: String
    package let realm: String
    package let localAccountId: String?
    package let username: String?
    package let name: String?
    package let idTokenClaims: String

    package init(environment: String, homeAccountId: String, realm: String, localAccountId: String?, username: String?, name: String?, idTokenClaims: String) {
        self.environment = environment
        self.homeAccountId = homeAccountId
        self.realm = realm
        self.localAccountId = localAccountId
        self.username = username
        self.name = name
        self.idTokenClaims = idTokenClaims
    }
}

/// How an import's first redemption ended in the store.
package struct ImportCompletion: Sendable {
    /// The account that now holds the tokens: the imported one, or the signed-in one it merged into.
    package let account: AccountRecord
    /// The access token as stored for `account`.
    package let accessToken: StoredAccessToken
    /// True when the imported account merged into an existing one (its id is now an alias).
    package let merged: Bool
}

/// ADAL imports (behaviour §3 `POST /v1/accounts/import`, §12 Accounts).
extension TokenStore {
    /// Creates an account known by username only (`home_account_id` null) holding `refreshToken`,
    /// sealed before it reaches the database, and its audit row, in one transaction.
    /// - Parameters:
    ///   - username: the ADAL-era UPN; the account is found by it at once.
    ///   - authority: where the refresh token is redeemed; its tenant is the realm until known.
    ///   - actor: the API key id for the audit row.
    ///   - detail: non-secret audit detail (e.g. the legacy `resource`).
    ///   - externalId: the external id the account gets (behaviour §3.7), replacing the earlier
    ///     one of the same owner on a replaced import.
    /// - Returns: the account and whether it is new. Importing a username again while its
    ///   earlier import still waits for its first redemption replaces that import's refresh token
    ///   (a re-run migration makes no duplicate accounts).
    /// - Throws: `RelayError` 409 `conflict` naming `external_id` when another account of its owner
    ///   holds it (nothing is written); `StoreError`.
    ///   - owner: the caller's key owner: the import is its own until a redemption confirms the
    ///     user (behaviour §3.6), and it replaces only that owner's pending import.
    package func importAccount(
        username: String, authority: Authority, refreshToken: String, actor: String, detail: [String: JSONValue], externalId: ExternalId? = nil,
        owner: String? = nil
    ) async throws -> (account: AccountRecord, created: Bool) {
        let clientId = self.clientId
        let accountId = "acc_" + RandomToken.make(bytes: 16)
        return try await database.transaction { connection in
            if let pending = try self.lockPendingImport(
                in: connection, username: username, environment: authority.environment, realm: authority.tenant.lowercased(), owner: owner)
            {
                let wasDead = try self.isInteractionRequired(in: connection, accountId: pending)
                _ = try connection.query(
                    "UPDATE accounts SET realm = $2, authority = $3, authority_type = $4, state = 'active' WHERE account_id = $1",
                    [.text(pending), .text(authority.tenant.lowercased()), .text(authority.url), .text(authority.type.rawValue)])
                try self.saveRefreshToken(
                    in: connection, accountId: pending, tenantId: authority.tenant, token: refreshToken, familyId: nil, cause: .importToken)
                if let externalId {
                    switch try Self.assign(externalId, to: pending, in: connection) {
                    case .heldByAnother: throw ExternalId.conflict()
                    // Other replicas re-read the account with its new external id.
                    case .assigned: try ReplicaNotifications.send(.accountChanged(pending), in: connection)
                    case .unchanged: break
                    }
                }
                try AuditStore.record(in: connection, .accountImported, actor: actor, accountId: pending, outcome: "replaced", detail: detail)
                if wasDead { try AccountEventStore.append(in: connection, .recovered, accountId: pending, data: ["reason": .string("import")]) }
                return (try self.account(in: connection, id: pending), false)
            }
            _ = try connection.query(
                """
                INSERT INTO accounts (account_id, client_id, environment, home_account_id, realm, username, authority, authority_type, state, imported_by)
                VALUES ($1, $2, $3, NULL, $4, $5, $6, $7, 'active', $8)
                """,
                [
                    .text(accountId), .text(clientId), .text(authority.environment), .text(authority.tenant.lowercased()), .text(username),
                    .text(authority.url), .text(authority.type.rawValue), Self.optional(owner),
                ])
            try self.saveRefreshToken(in: connection, accountId: accountId, tenantId: authority.tenant, token: refreshToken, familyId: nil, cause: .importToken)
            if let externalId, try Self.assign(externalId, to: accountId, in: connection) == .heldByAnother { throw ExternalId.conflict() }
            try AuditStore.record(in: connection, .accountImported, actor: actor, accountId: accountId, outcome: "success", detail: detail)
            return (try self.account(in: connection, id: accountId), true)
        }
    }

    /// The pending import of `username` in `environment` and `realm` (the import's tenant: an
    /// import into one tenant never replaces another tenant's), with its refresh lock taken (the
    /// lock before the row, as in every transaction), or nil when there is none.
    /// Only an import of `owner` (or one written before imports recorded their owner) is replaced.
    package func lockPendingImport(in connection: PostgresConnection, username: String, environment: String, realm: String, owner: String? = nil) throws
        -> String?
    {
        guard
            let pending = try connection.query(
                """
                SELECT account_id FROM accounts WHERE client_id = $1 AND environment = $2 AND home_account_id IS NULL AND \(Self.usernameKey("username")) = \(Self.usernameKey("$3"))
                  AND lower(realm) = lower($4) AND (imported_by IS NULL OR imported_by = $5::text)
                ORDER BY account_id LIMIT 1
                """,
                [.text(clientId), .text(environment), .text(username), .text(realm), Self.optional(owner)]
            ).rows.first?.string("account_id")
        else { return nil }
        try Self.lockRefresh(in: connection, accountId: pending, clientId: clientId)
        // Its first redemption may have finished while this transaction waited for the lock.
        return try isPendingImport(in: connection, accountId: pending) ? pending : nil
    }

    /// Whether the account is in `interaction_required` (read under its refresh lock).
    package func isInteractionRequired(in connection: PostgresConnection, accountId: String) throws -> Bool {
        try connection.query(
            "SELECT 1 FROM accounts WHERE account_id = $1 AND state = 'interaction_required'", [.text(accountId)]
        ).rows.first != nil
    }

    /// Whether an imported account still waits for its first redemption (read under its lock).
    package func isPendingImport(in connection: PostgresConnection, accountId: String) throws -> Bool {
        try connection.query(
            "SELECT 1 FROM accounts WHERE account_id = $1 AND client_id = $2 AND home_account_id IS NULL", [.text(accountId), .text(clientId)]
        ).rows.first != nil
    }

    /// Whether an imported account still waits for its first redemption.
    package func isPendingImport(accountId: String) async throws -> Bool {
        try await database.run { connection in try self.isPendingImport(in: connection, accountId: accountId) }
    }

    /// Records what the first redemption of an imported refresh token returned, inside the
    /// transaction holding the imported account's refresh lock.
    ///
    /// Without another account for (client_id, environment, home_account_id) the imported account
    /// gets its identity. Otherwise it merges into that signed-in account (behaviour §12): the
    /// survivor keeps its own refresh token when it has one (else takes the imported one), the
    /// new access token is sealed again for the survivor's id (the additional data binds the
    /// account id), the imported row and its ciphertexts go, and its id becomes an alias.
    /// - Parameters:
    ///   - importedId: the imported account.
    ///   - identity: from `client_info` and the id_token.
    ///   - refreshToken: the refresh token the imported account holds now (after rotation).
    ///   - familyId: `foci` of the response.
    ///   - accessToken: the new token, owned by the imported account.
    ///   - actor: the API key id of the request that redeemed it, for the audit row (behaviour §12 Audit).
    package func completeImport(
        in connection: PostgresConnection, importedId: String, identity: LearnedIdentity, refreshToken: String?, familyId: String?,
        accessToken: StoredAccessToken, actor: String
    ) throws -> ImportCompletion {
        // A sign-in of the same user may be storing this identity right now (its account row
        // written, not yet committed): wait for it, then merge into what it stored, rather than
        // setting home_account_id into the unique index's violation (behaviour §12 Accounts).
        try Self.lockIdentity(in: connection, clientId: clientId, environment: identity.environment, homeAccountId: identity.homeAccountId)
        let survivorId = try connection.query(
            "SELECT account_id FROM accounts WHERE client_id = $1 AND environment = $2 AND home_account_id = $3 AND account_id <> $4",
            [.text(clientId), .text(identity.environment), .text(identity.homeAccountId), .text(importedId)]
        ).rows.first?.string("account_id")
        let isHome = identity.homeAccountId.hasSuffix("." + identity.realm)

        guard let survivorId else {
            _ = try connection.query(
                """
                UPDATE accounts SET home_account_id = $2, realm = $3, local_account_id = $4, username = COALESCE($5, username),
                  name = $6, id_token_claims = $7::jsonb, state = 'active'
                WHERE account_id = $1
                """,
                [
                    .text(importedId), .text(identity.homeAccountId), .text(identity.realm), Self.optional(identity.localAccountId),
                    Self.optional(identity.username), Self.optional(identity.name), .text(identity.idTokenClaims),
                ])
            try saveTenantProfile(in: connection, accountId: importedId, realm: identity.realm, localAccountId: identity.localAccountId, isHome: isHome)
            try saveAccessToken(in: connection, accessToken)
            try AuditStore.record(in: connection, .importCompleted, actor: actor, accountId: importedId, outcome: "identified")
            return ImportCompletion(account: try account(in: connection, id: importedId), accessToken: accessToken, merged: false)
        }

        try Self.lockRefresh(in: connection, accountId: survivorId, clientId: clientId)
        let survivorHasToken = try self.refreshToken(in: connection, accountId: survivorId) != nil
        let revived = try !survivorHasToken && refreshToken != nil && isInteractionRequired(in: connection, accountId: survivorId)
        if !survivorHasToken, let refreshToken {
            try saveRefreshToken(in: connection, accountId: survivorId, tenantId: identity.realm, token: refreshToken, familyId: familyId, cause: .importToken)
            _ = try connection.query("UPDATE accounts SET state = 'active' WHERE account_id = $1", [.text(survivorId)])
        }
        let moved = accessToken.owned(by: survivorId)
        try saveAccessToken(in: connection, moved)
        try saveTenantProfile(in: connection, accountId: survivorId, realm: identity.realm, localAccountId: identity.localAccountId, isHome: isHome)
        // Aliases of the imported account follow it before its row (and their cascade) goes, and
        // so do its external ids where the survivor has none of that owner (behaviour §3.7).
        _ = try connection.query("UPDATE account_aliases SET account_id = $2 WHERE account_id = $1", [.text(importedId), .text(survivorId)])
        if try Self.moveExternalIds(from: importedId, to: survivorId, in: connection) > 0 {
            // Other replicas re-read the survivor with the external ids it took over, and stop
            // trusting what they remember of the imported account (the ids named it).
            try ReplicaNotifications.send(.accountChanged(survivorId), in: connection)
            try ReplicaNotifications.send(.accountChanged(importedId), in: connection)
        }
        _ = try connection.query("DELETE FROM accounts WHERE account_id = $1", [.text(importedId)])
        _ = try connection.query(
            "INSERT INTO account_aliases (alias_account_id, account_id, client_id) VALUES ($1, $2, $3)",
            [.text(importedId), .text(survivorId), .text(clientId)])
        try AuditStore.record(
            in: connection, .importMerged, actor: actor, accountId: survivorId, outcome: "merged",
            detail: ["alias_account_id": .string(importedId), "refresh_token": .string(survivorHasToken ? "kept" : "imported")])
        // Last, as every event append (behaviour §12: in the transaction of the change it reports).
        if revived { try AccountEventStore.append(in: connection, .recovered, accountId: survivorId, data: ["reason": .string("import")]) }
        // The import reconnected an account its user signed in before (behaviour §3.6, §3.9).
        try AccountEventStore.append(
            in: connection, .signedIn, accountId: survivorId,
            data: [
                "created": .bool(false), "sign_in_id": .null, "tenant_id": .string(identity.realm.lowercased()),
                "alias_account_id": .string(importedId),
            ])
        return ImportCompletion(account: try account(in: connection, id: survivorId), accessToken: moved, merged: true)
    }

    /// Serialises every writer of one user's identity, (client_id, environment,
    /// home_account_id), the key of the accounts' unique index: a sign-in storing it and an
    /// import's first redemption learning it (behaviour §12 Accounts). Transaction-scoped (pgbouncer
    /// in transaction mode, behaviour §8). Taken after the imported account's refresh lock and before
    /// any other account's: a sign-in takes it first of all, and the account an import locks
    /// first has no home_account_id yet, so no sign-in can be waiting for that lock (no cycle).
    package static func lockIdentity(in connection: PostgresConnection, clientId: String, environment: String, homeAccountId: String) throws {
        _ = try connection.query(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 7))", [.text("identity|\(clientId)|\(environment)|\(homeAccountId)")])
    }

    /// Adds or refreshes one tenant profile of an account (behaviour §12: a guest has several).
    package func saveTenantProfile(in connection: PostgresConnection, accountId: String, realm: String, localAccountId: String?, isHome: Bool) throws {
        _ = try connection.query(
            """
            INSERT INTO account_tenant_profiles (account_id, realm, local_account_id, is_home) VALUES ($1, $2, $3, $4)
            ON CONFLICT (account_id, realm) DO UPDATE SET local_account_id = COALESCE(EXCLUDED.local_account_id, account_tenant_profiles.local_account_id),
              is_home = EXCLUDED.is_home, updated_at = now()
            """,
            [.text(accountId), .text(realm), Self.optional(localAccountId), .bool(isHome)])
    }

    /// The account row inside a transaction.
    package func account(in connection: PostgresConnection, id: String) throws -> AccountRecord {
        guard let row = try connection.query("SELECT \(Self.accountColumns) FROM accounts WHERE account_id = $1", [.text(id)]).rows.first else {
            throw RelayError(.internal, "An account vanished inside its own transaction.")
        }
        return Self.account(from: row)
    }
}
