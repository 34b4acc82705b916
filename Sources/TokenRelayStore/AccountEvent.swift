import IdentityCore
import TokenRelayBase

/// One account event (behaviour §12 Webhooks and events) as read from the outbox.
package struct AccountEvent: Sendable, Equatable {
    package enum Kind: String, Sendable, CaseIterable {
        case interactionRequired = "account.interaction_required"
        case recovered = "account.recovered"
        case deleted = "account.deleted"
        case keepAliveFailed = "account.keepalive_failed"
        /// A sign-in completed or an import merged into an account (behaviour §3.9):
        /// `data.created`, `data.sign_in_id`, `data.tenant_id`.
        case signedIn = "account.signed_in"
        /// A sign-in failed at its callback: `data.sign_in_id`, `data.error`; the account it was
        /// for, if any.
        case signInFailed = "sign_in.failed"
    }

    /// Position in the outbox; orders events and cursors, never shown.
    package let seq: Int64
    package let id: String
    package let type: String
    package let occurredAt: String
    /// Nil for a `sign_in.failed` of a sign-in that named no account.
    package let accountId: String?
    /// The account's tenant when the event was written (its realm), lower-cased; nil for an
    /// account whose row was gone by then (behaviour §12 Tenants).
    package var tenantId: String? = nil
    package let data: JSONValue

    /// The event object of the API and the webhook body:
    /// `{id, type, occurred_at, account_id, tenant_id, data}`.
    package var json: JSONValue {
        .object([
            "id": .string(id), "type": .string(type), "occurred_at": .string(occurredAt), "account_id": accountId.map(JSONValue.string) ?? .null,
            "tenant_id": tenantId.map(JSONValue.string) ?? .null, "data": data,
        ])
    }
}
