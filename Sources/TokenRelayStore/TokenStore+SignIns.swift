import Foundation
import IdentityCore
import PostgresBridge
import TokenRelayBase

/// A sign-in waiting for its callback (authorization code flow with PKCE, behaviour §3).
package struct PendingSignIn: Sendable {
    package let signInId: String
    package let authority: String
    /// Canonical requested scopes.
    package let scopes: [String]
    package let nonce: String
    package let codeVerifier: String
    package let redirectAfter: String?
    /// Unix seconds.
    package let expiresAt: Int
    /// Who started it, for the audit row of its completion (behaviour §12 Audit): the API key id,
    /// ``SignInService/linkActor`` for a signed start link; nil for a row an older replica wrote.
    package var startedBy: String? = nil
    /// The `claims` the authorize request carried (challenge and capabilities merged), sent
    /// again with the code redemption; nil when none (or a row an older replica wrote).
    package var claims: String? = nil
    /// The external id the account gets when the sign-in completes, and whose (behaviour §3.7);
    /// nil without one, for a signed start link, or a row an older replica wrote.
    package var externalId: ExternalId? = nil
    /// The `login_hint` the authorize request carried, for the `sign_in_url` of a callback that
    /// asks for interaction (behaviour §4.4); nil when none (or a row an older replica wrote).
    package var loginHint: String? = nil
    /// The user the sign-in is for (behaviour §3.8): the callback refuses any other with 409
    /// `user_mismatch`; nil leaves it open to any user.
    package var expectedHomeAccountId: String? = nil
    /// The account of ``expectedHomeAccountId`` when the sign-in started (named by the refusal).
    package var expectedAccountId: String? = nil

    package init(
        signInId: String, authority: String, scopes: [String], nonce: String, codeVerifier: String, redirectAfter: String?, expiresAt: Int,
        startedBy: String? = nil, claims: String? = nil, externalId: ExternalId? = nil, loginHint: String? = nil,
        expectedHomeAccountId: String? = nil, expectedAccountId: String? = nil
    ) {
        self.signInId = signInId
        self.authority = authority
        self.scopes = scopes
        self.nonce = nonce
        self.codeVerifier = codeVerifier
        self.redirectAfter = redirectAfter
        self.expiresAt = expiresAt
        self.startedBy = startedBy
        self.claims = claims
        self.externalId = externalId
        self.loginHint = loginHint
        self.expectedHomeAccountId = expectedHomeAccountId
        self.expectedAccountId = expectedAccountId
    }
}

/// What a successful sign-in writes, in one transaction.
package struct SignedInAccount: Sendable {
    package let environment: String
    package let homeAccountId: String
    package let realm: String
    package let localAccountId: String?
    package let username: String?
    package let name: String?
    package let authority: Authority
    package let idTokenClaims: String

    package init(
        environment: String, homeAccountId: String, realm: String, localAccountId: String?, username: String?, name: String?, authority: Authority,
        idTokenClaims: String
    ) {
        self.environment = environment
        self.homeAccountId = homeAccountId
        self.realm = realm
        self.localAccountId = localAccountId
        self.username = username
        self.name = name
        self.authority = authority
        self.idTokenClaims = idTokenClaims
    }

    /// Whether this sign-in is in the user's home tenant (`utid` of `home_account_id`).
    package var isHomeTenant: Bool { homeAccountId.hasSuffix("." + realm) }
}

extension TokenStore {
    /// Stores a pending sign-in keyed by the SHA-256 of its `state` (the state itself is never stored).
    package func savePendingSignIn(_ signIn: PendingSignIn, stateHash: [UInt8]) async throws {
        let sealed = try cipher.seal(signIn.codeVerifier, for: SealingContext(owner: signIn.signInId, kind: .pkceVerifier, clientId: clientId))
        _ = try await database.run { connection in
            // Expired rows go with each new insert, so the table stays small without a sweeper.
            _ = try connection.query("DELETE FROM sign_ins WHERE expires_at < now() - interval '1 hour'")
            return try connection.query(
                """
                INSERT INTO sign_ins (state_hash, sign_in_id, authority, scopes, nonce, verifier_key_id, verifier_nonce, verifier_ciphertext, redirect_after, expires_at,
                                      started_by, claims, external_id, external_id_owner, login_hint, expected_home_account_id, expected_account_id)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, to_timestamp($10), $11, $12, $13, $14, $15, $16, $17)
                """,
                [
                    .bytes(stateHash), .text(signIn.signInId), .text(signIn.authority), .text(signIn.scopes.joined(separator: " ")),
                    .text(signIn.nonce), .text(sealed.keyId), .bytes(sealed.nonce), .bytes(sealed.ciphertext),
                    Self.optional(signIn.redirectAfter), .int(Int64(signIn.expiresAt)), Self.optional(signIn.startedBy), Self.optional(signIn.claims),
                    Self.optional(signIn.externalId?.value), Self.optional(signIn.externalId?.owner), Self.optional(signIn.loginHint),
                    Self.optional(signIn.expectedHomeAccountId), Self.optional(signIn.expectedAccountId),
                ]
            ).affectedRows
        }
    }

    /// Gives a sign-in the callback took back to its callback: `pending` again, its PKCE verifier
    /// sealed again, when its code was not redeemed because the authority could not be reached or
    /// asked to wait (behaviour §3.2). Only a `redeeming` row changes.
    /// - Returns: whether the sign-in is pending again.
    package func releasePendingSignIn(_ signIn: PendingSignIn) async throws -> Bool {
        let sealed = try cipher.seal(signIn.codeVerifier, for: SealingContext(owner: signIn.signInId, kind: .pkceVerifier, clientId: clientId))
        return try await database.run { connection in
            try connection.query(
                """
                UPDATE sign_ins SET status = 'pending', verifier_key_id = $2, verifier_nonce = $3, verifier_ciphertext = $4
                WHERE sign_in_id = $1 AND status = 'redeeming'
                """,
                [.text(signIn.signInId), .text(sealed.keyId), .bytes(sealed.nonce), .bytes(sealed.ciphertext)]
            ).affectedRows == 1
        }
    }

    /// The sign-in a callback's state hash (`$1`) names, still pending at `$2` (Unix seconds):
    /// one condition for the callback that takes it and the `HEAD` that only looks.
    private static let pendingForState = "state_hash = $1 AND status = 'pending' AND expires_at > to_timestamp($2)"

    /// Whether a callback with `stateHash` would find its sign-in pending (not taken, not expired
    /// at `now`, Unix seconds), without taking it: `HEAD` on the callback (behaviour §3.2).
    package func isSignInPending(stateHash: [UInt8], now: Int) async throws -> Bool {
        try await database.run { connection in
            try connection.query(
                "SELECT 1 AS pending FROM sign_ins WHERE \(Self.pendingForState)",
                [.bytes(stateHash), .int(Int64(now))]
            ).rows.first != nil
        }
    }

    /// Takes the pending sign-in for `stateHash` exactly once: the row turns `redeeming` and its
    /// PKCE verifier is wiped as it is read, so a replayed callback finds nothing; the row stays
    /// for ``signInOutcome(id:)`` (behaviour §3.9). Expired rows (`expires_at` not after `now`,
    /// Unix seconds) are not returned.
    package func consumePendingSignIn(stateHash: [UInt8], now: Int) async throws -> PendingSignIn? {
        let clientId = self.clientId
        let cipher = self.cipher
        return try await database.run { connection in
            guard
                let row = try connection.query(
                    """
                    WITH taken AS (
                      SELECT * FROM sign_ins WHERE \(Self.pendingForState) FOR UPDATE)
                    UPDATE sign_ins s SET status = 'redeeming', verifier_key_id = NULL, verifier_nonce = NULL, verifier_ciphertext = NULL
                    FROM taken WHERE s.state_hash = taken.state_hash
                    RETURNING taken.sign_in_id, taken.authority, taken.scopes, taken.nonce, taken.verifier_key_id, taken.verifier_nonce,
                      taken.verifier_ciphertext, taken.redirect_after, extract(epoch FROM taken.expires_at)::bigint AS expires_at, taken.started_by,
                      taken.claims, taken.external_id, taken.external_id_owner, taken.login_hint, taken.expected_home_account_id,
                      taken.expected_account_id
                    """,
                    [.bytes(stateHash), .int(Int64(now))]
                ).rows.first
            else { return nil }
            let signInId = row.string("sign_in_id") ?? ""
            let expiresAt = Int(row.int("expires_at") ?? 0)
            let sealed = SealedSecret(
                keyId: row.string("verifier_key_id") ?? "", nonce: row.bytes("verifier_nonce") ?? [], ciphertext: row.bytes("verifier_ciphertext") ?? [])
            let verifier = try cipher.open(sealed, for: SealingContext(owner: signInId, kind: .pkceVerifier, clientId: clientId))
            var externalId: ExternalId?
            if let value = row.string("external_id"), let owner = row.string("external_id_owner") { externalId = ExternalId(owner: owner, value: value) }
            return PendingSignIn(
                signInId: signInId, authority: row.string("authority") ?? "",
                scopes: (row.string("scopes") ?? "").split(separator: " ").map(String.init), nonce: row.string("nonce") ?? "",
                codeVerifier: verifier, redirectAfter: row.string("redirect_after"), expiresAt: expiresAt,
                startedBy: row.string("started_by"), claims: row.string("claims"), externalId: externalId, loginHint: row.string("login_hint"),
                expectedHomeAccountId: row.string("expected_home_account_id"), expectedAccountId: row.string("expected_account_id"))
        }
    }

    /// Creates or updates the account of a sign-in and stores its tokens and its audit row in one
    /// transaction. A returning user keeps their `account_id`; the account becomes `active` again.
    ///
    /// A returning user's refresh lock is taken before anything is written, so a refresh already
    /// running for the account finishes first (and cannot then delete the new refresh token), and
    /// the lock comes before the account row's lock in every transaction (no deadlock). Before
    /// both, the identity's lock (``lockIdentity(in:clientId:environment:homeAccountId:)``)
    /// serialises it with an import's first redemption of the same user (behaviour §12 Accounts).
    ///
    /// The sign-in's external id is given to the account last (``assign(_:to:in:)``); when
    /// another account of its owner took it since the sign-in started, the sign-in is stored all
    /// the same and the account keeps what it had (behaviour §3.7).
    /// - Parameters:
    ///   - actor: who started the sign-in, for its audit row (behaviour §12 Audit).
    ///   - externalId: the pending sign-in's external id, if any.
    ///   - signInId: the sign-in's id: its row turns `completed` and its `account.signed_in`
    ///     event is written in the same transaction (behaviour §3.9, §12 Webhooks and events).
    /// - Returns: the account as stored, whether this sign-in created it, and how the external id
    ///   was given (nil without one).
    package func saveSignIn(
        _ account: SignedInAccount, refreshToken: String?, familyId: String?, accessToken: StoredAccessToken?, actor: String,
        externalId: ExternalId? = nil, signInId: String? = nil
    ) async throws -> (account: AccountRecord, created: Bool, externalId: ExternalIdAssignment?) {
        let clientId = self.clientId
        let newId = "acc_" + RandomToken.make(bytes: 16)
        return try await database.transaction { connection in
            // An import's first redemption may be giving another account this identity right now:
            // whichever takes this lock first stores it, the other then finds it and merges.
            try Self.lockIdentity(in: connection, clientId: clientId, environment: account.environment, homeAccountId: account.homeAccountId)
            let existing = try connection.query(
                "SELECT account_id, state FROM accounts WHERE client_id = $1 AND environment = $2 AND home_account_id = $3",
                [.text(clientId), .text(account.environment), .text(account.homeAccountId)]
            ).rows.first
            if let existingId = existing?.string("account_id") {
                try Self.lockRefresh(in: connection, accountId: existingId, clientId: clientId)
            }
            guard
                let row = try connection.query(
                    """
                    INSERT INTO accounts (account_id, client_id, environment, home_account_id, realm, local_account_id, username, name,
                                          authority, authority_type, state, id_token_claims)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'active', $11::jsonb)
                    ON CONFLICT (client_id, environment, home_account_id) DO UPDATE SET
                      realm = CASE WHEN $12 THEN EXCLUDED.realm ELSE accounts.realm END,
                      local_account_id = CASE WHEN $12 THEN EXCLUDED.local_account_id ELSE accounts.local_account_id END,
                      authority = CASE WHEN $12 THEN EXCLUDED.authority ELSE accounts.authority END,
                      username = EXCLUDED.username, name = EXCLUDED.name, authority_type = EXCLUDED.authority_type,
                      state = 'active', id_token_claims = CASE WHEN $12 THEN EXCLUDED.id_token_claims ELSE accounts.id_token_claims END
                    RETURNING \(Self.accountColumns)
                    """,
                    [
                        .text(newId), .text(clientId), .text(account.environment), .text(account.homeAccountId), .text(account.realm),
                        Self.optional(account.localAccountId), Self.optional(account.username), Self.optional(account.name),
                        .text(account.authority.url), .text(account.authority.type.rawValue), .text(account.idTokenClaims),
                        .bool(account.isHomeTenant),
                    ]
                ).rows.first
            else { throw RelayError(.internal, "The account could not be stored.") }
            // A guest signing into another tenant keeps one account with one more profile (behaviour §12):
            // its home realm, oid, authority and claims stay unless this sign-in is in the home tenant.
            let accountId = Self.account(from: row).accountId
            try self.saveTenantProfile(
                in: connection, accountId: accountId, realm: account.realm, localAccountId: account.localAccountId, isHome: account.isHomeTenant)
            let assignment = try externalId.map { externalId in try Self.assign(externalId, to: accountId, in: connection) }
            let record = try self.account(in: connection, id: accountId)
            if let refreshToken {
                try self.saveRefreshToken(
                    in: connection, accountId: record.accountId, tenantId: record.realm, token: refreshToken, familyId: familyId, cause: .signIn)
            }
            if let accessToken {
                try self.saveAccessToken(in: connection, accessToken.owned(by: record.accountId))
            }
            try AuditStore.record(in: connection, .signInCompleted, actor: actor, accountId: record.accountId, outcome: "success")
            let created = existing == nil
            if let signInId {
                try connection.query(
                    "UPDATE sign_ins SET status = 'completed', account_id = $2, account_created = $3, finished_at = now() WHERE sign_in_id = $1",
                    [.text(signInId), .text(record.accountId), .bool(created)])
                try ReplicaNotifications.send(.signInFinished(signInId), in: connection)
            }
            if existing?.string("state") == AccountRecord.State.interactionRequired.rawValue {
                try AccountEventStore.append(in: connection, .recovered, accountId: record.accountId, data: ["reason": .string("sign_in")])
            }
            try AccountEventStore.append(
                in: connection, .signedIn, accountId: record.accountId,
                data: ["created": .bool(created), "sign_in_id": signInId.map(JSONValue.string) ?? .null, "tenant_id": .string(account.realm.lowercased())])
            // Other replicas forget their memories of the account (behaviour §12).
            try ReplicaNotifications.send(.accountSignedIn(record.accountId), in: connection)
            return (record, created, assignment)
        }
    }
}

extension StoredAccessToken {
    /// The same entry for another owner (a sign-in learns its account id inside the transaction).
    package func owned(by accountId: String) -> StoredAccessToken {
        StoredAccessToken(
            accountId: accountId, environment: environment, realm: realm, clientId: clientId, scopes: scopes, secret: secret,
            expiresOn: expiresOn, extExpiresOn: extExpiresOn, refreshOn: refreshOn, obtainedBy: obtainedBy)
    }
}

/// Where a sign-in stands (behaviour §3.9, `GET /v1/sign-ins/{sign_in_id}`).
package struct SignInOutcome: Sendable, Equatable {
    package enum Status: String, Sendable {
        case pending, completed, failed, expired
    }

    package let signInId: String
    package let status: Status
    /// Unix seconds.
    package let expiresAt: Int
    /// Who started it (``PendingSignIn/startedBy``).
    package let startedBy: String?
    /// `completed`: the account, and whether the sign-in created it.
    package var accountId: String? = nil
    package var created: Bool? = nil
    /// `failed`: the problem (`error`, `status`, `detail` and its extensions), never a secret.
    package var problem: JSONValue? = nil

    package init(
        signInId: String, status: Status, expiresAt: Int, startedBy: String?, accountId: String? = nil, created: Bool? = nil, problem: JSONValue? = nil
    ) {
        self.signInId = signInId
        self.status = status
        self.expiresAt = expiresAt
        self.startedBy = startedBy
        self.accountId = accountId
        self.created = created
        self.problem = problem
    }
}

extension TokenStore {
    /// The outcome of sign-in `id`, nil when no row holds it (never started here, or gone an
    /// hour after it expired). A row still `pending` or `redeeming` at `now` (unix seconds) past
    /// its `expires_at` is `expired`; a callback already redeeming finishes it all the same.
    package func signInOutcome(id: String, now: Int) async throws -> SignInOutcome? {
        try await database.run { connection in
            guard
                let row = try connection.query(
                    """
                    SELECT sign_in_id, status, extract(epoch FROM expires_at)::bigint AS expires_at, started_by, account_id, account_created,
                      problem::text AS problem
                    FROM sign_ins WHERE sign_in_id = $1
                    """,
                    [.text(id)]
                ).rows.first
            else { return nil }
            let expiresAt = Int(row.int("expires_at") ?? 0)
            let status: SignInOutcome.Status =
                switch row.string("status") {
                case "completed": .completed
                case "failed": .failed
                default: expiresAt > now ? .pending : .expired
                }
            return SignInOutcome(
                signInId: id, status: status, expiresAt: expiresAt, startedBy: row.string("started_by"), accountId: row.string("account_id"),
                created: row.bool("account_created"), problem: row.string("problem").flatMap { JSONValue.parse($0) })
        }
    }

    /// Records that sign-in `signInId` failed with `problem` (its `sign_in.failed` event, and
    /// for a refused user its audit row, in one transaction) and wakes whoever follows it.
    /// - Parameters:
    ///   - accountId: the account the sign-in was for, if any (named by the event and the audit row).
    ///   - refusal: the audit row of a refusal (``AuditStore/Action/signInRefused``): its actor and outcome.
    package func failSignIn(signInId: String, problem: JSONValue, accountId: String?, refusal: (actor: String, outcome: String)? = nil) async throws {
        let problemText = String(decoding: JSONWriter.encode(problem), as: UTF8.self)
        try await database.transaction { connection in
            try connection.query(
                "UPDATE sign_ins SET status = 'failed', problem = $2::jsonb, finished_at = now() WHERE sign_in_id = $1",
                [.text(signInId), .text(problemText)])
            if let refusal {
                try AuditStore.record(
                    in: connection, .signInRefused, actor: refusal.actor, accountId: accountId, outcome: refusal.outcome,
                    detail: ["sign_in_id": .string(signInId)])
            }
            try ReplicaNotifications.send(.signInFinished(signInId), in: connection)
            try AccountEventStore.append(
                in: connection, .signInFailed, accountId: accountId,
                data: ["sign_in_id": .string(signInId), "error": problem.objectValue?["error"] ?? .null])
        }
    }
}
