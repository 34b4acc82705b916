import IdentityCore

/// One account event (behaviour §12 Webhooks and events) as read from the outbox.
struct AccountEvent: Sendable, Equatable {
    enum Kind: String, Sendable, CaseIterable {
        case interactionRequired = "account.interaction_required"
        case recovered = "account.recovered"
        case deleted = "account.deleted"
        case keepAliveFailed = "account.keepalive_failed"
    }

    /// Position in the outbox; orders events and cursors, never shown.
    let seq: Int64
    let id: String
    let type: String
    let occurredAt: String
    let accountId: String
    /// The account's tenant when the event was written (its realm), lower-cased; nil for an
    /// account whose row was gone by then (behaviour §12 Tenants).
    var tenantId: String? = nil
    let data: JSONValue

    /// The event object of the API and the webhook body:
    /// `{id, type, occurred_at, account_id, tenant_id, data}`.
    var json: JSONValue {
        .object([
            "id": .string(id), "type": .string(type), "occurred_at": .string(occurredAt), "account_id": .string(accountId),
            "tenant_id": tenantId.map(JSONValue.string) ?? .null, "data": data,
        ])
    }
}
