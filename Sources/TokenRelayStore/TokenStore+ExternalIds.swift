import PostgresBridge
import TokenRelayBase

/// External ids (behaviour §3.7, §12 Accounts; table `account_external_ids`, migration 0014):
/// at most one per (account, owner), unique per (owner, external id), freed with the account.
extension TokenStore {
    /// The account of this client holding `externalId` for its owner, or nil.
    package func holder(of externalId: ExternalId) async throws -> String? {
        let clientId = self.clientId
        return try await database.run { connection in
            try connection.query(
                """
                SELECT x.account_id FROM account_external_ids x JOIN accounts a ON a.account_id = x.account_id
                WHERE x.owner = $1 AND x.external_id = $2 AND a.client_id = $3
                """,
                [.text(externalId.owner), .text(externalId.value), .text(clientId)]
            ).rows.first?.string("account_id")
        }
    }

    /// Gives `accountId` the external id inside the caller's transaction, replacing the account's
    /// earlier external id of the same owner, unless another account holds it.
    ///
    /// A transaction-scoped advisory lock on (owner, external id) serialises writers of one
    /// external id, so a second writer sees the first's row rather than failing on the unique
    /// index (which would abort the caller's whole transaction, e.g. a sign-in). Taken after the
    /// transaction's identity, refresh and account-row locks, and no transaction holding it
    /// waits for another account's.
    /// - Returns: `.assigned`, `.unchanged` (the account held it already) or `.heldByAnother`
    ///   (nothing written).
    /// - Throws: `PostgresError` from the statements.
    package static func assign(_ externalId: ExternalId, to accountId: String, in connection: PostgresConnection) throws -> ExternalIdAssignment {
        _ = try connection.query(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 7))", [.text("external_id|\(externalId.owner)|\(externalId.value)")])
        let holder = try connection.query(
            "SELECT account_id FROM account_external_ids WHERE owner = $1 AND external_id = $2",
            [.text(externalId.owner), .text(externalId.value)]
        ).rows.first?.string("account_id")
        if let holder { return holder == accountId ? .unchanged : .heldByAnother }
        _ = try connection.query(
            """
            INSERT INTO account_external_ids (account_id, owner, external_id) VALUES ($1, $2, $3)
            ON CONFLICT (account_id, owner) DO UPDATE SET external_id = EXCLUDED.external_id, created_at = now()
            """,
            [.text(accountId), .text(externalId.owner), .text(externalId.value)])
        return .assigned
    }

    /// Moves the external ids of a merged import to the account it merged into, for each owner
    /// the survivor has none of (the survivor's own wins; the import's then goes with its row).
    /// - Returns: how many moved.
    package static func moveExternalIds(from importedId: String, to survivorId: String, in connection: PostgresConnection) throws -> Int {
        try connection.query(
            """
            UPDATE account_external_ids SET account_id = $2
            WHERE account_id = $1 AND owner NOT IN (SELECT s.owner FROM account_external_ids s WHERE s.account_id = $2)
            """,
            [.text(importedId), .text(survivorId)]
        ).affectedRows
    }

    /// The account id a value given as `account_id` stands for (an import alias or, with
    /// `owner`, that owner's external id); the value itself when it names nothing else.
    package func canonicalAccountId(_ id: String, owner: String?) async throws -> String {
        try await database.run { connection in
            try connection.query(
                "SELECT \(Self.resolvedAccountIdOrExternalId(owner: "$2")) AS account_id", [.text(id), Self.optional(owner)]
            ).rows.first?.string("account_id") ?? id
        }
    }
}
