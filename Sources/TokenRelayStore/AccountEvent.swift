import IdentityCore
import TokenRelayBase

/// One account event (behaviour §12 Webhooks and events) as read from the outbox.
package struct AccountEvent: Sendable, Equatable {
    package enum Kind: String, Sendable, CaseIterable {
        case interactionRequired = "account.interaction_required"
        case recovered = "account.recovered"
        case deleted = "account.deleted"
        case keepAliveFailed = "account.keepalive_failed"
    }

    /// Position in the outbox; orders events and cursors, never shown.
    package let seq: Int64
    package let id: String
    package let type: String
    package let occurredAt: String
    package let accountId: String
    /// The account's tenant when the event was written (its realm), lower-cased; nil for an
    /// account whose row was gone by then (behaviour §12 Tenants).
    package var tenantId: String? = nil
    package let data: JSONValue

    /// The event object of the API and the webhook body:
    /// `{id, type, occurred_at, account_id, tenant_id, data}`.
    package var json: JSONValue {
        .object([
            "id": .string(id), "type": .string(type), "occurred_at": .string(occurredAt), "account_id": .string(accountId),
            "tenant_id": tenantId.map(JSONValue.string) ?? .null, "data": data,
        ])
    }
}
