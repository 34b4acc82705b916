import IdentityCore
import PostgresBridge
import TokenRelayBase

/// The append-only audit trail (behaviour §12 Audit): who (API key id), what, which account, the
/// outcome and when. Never a token or secret in `detail`.
package struct AuditStore: Sendable {
    package let database: Database

    package init(database: Database) {
        self.database = database
    }

    package enum Action: String, Sendable {
        case signInCompleted = "sign_in.completed"
        /// A sign-in bound to an account completed by another user (behaviour §3.8): `outcome`
        /// `user_mismatch`, the expected account, `detail.sign_in_id`; nothing of the other user.
        case signInRefused = "sign_in.refused"
        case accountDeleted = "account.deleted"
        case accountImported = "account.imported"
        case importCompleted = "account.import_completed"
        case importMerged = "account.import_merged"
        case apiKeyCreated = "api_key.created"
        case apiKeyRevoked = "api_key.revoked"
        case encryptionRotated = "encryption.rotated"
        /// `token-relay encryption rewrap`: data keys wrapped again under the primary KEK (ADR 0017).
        case dataKeysRewrapped = "encryption.rewrapped"
        /// `token-relay tenants forget`: a tenant's accounts deleted and its data key destroyed.
        case tenantForgotten = "tenant.forgotten"
        /// `detail.tenant_id`; `outcome` `suspended` or `already_suspended` (behaviour §12 Tenants).
        case tenantSuspended = "tenant.suspended"
        /// `detail.tenant_id`; `outcome` `resumed` or `not_suspended`.
        case tenantResumed = "tenant.resumed"
    }

    package func record(_ action: Action, actor: String, accountId: String?, outcome: String, detail: [String: JSONValue] = [:]) async throws {
        try await database.run { connection in
            try Self.record(in: connection, action, actor: actor, accountId: accountId, outcome: outcome, detail: detail)
        }
    }

    /// The same row inside a caller's transaction, so it commits with what it describes.
    package static func record(
        in connection: PostgresConnection, _ action: Action, actor: String, accountId: String?, outcome: String, detail: [String: JSONValue] = [:]
    ) throws {
        let detailText = String(decoding: JSONWriter.encode(.object(detail)), as: UTF8.self)
        try connection.query(
            "INSERT INTO audit_events (actor, action, account_id, outcome, detail) VALUES ($1, $2, $3, $4, $5::jsonb)",
            [.text(actor), .text(action.rawValue), TokenStore.optional(accountId), .text(outcome), .text(detailText)])
    }
}
