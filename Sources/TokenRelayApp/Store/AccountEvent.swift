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
    let data: JSONValue

    /// The event object of the API and the webhook body: `{id, type, occurred_at, account_id, data}`.
    var json: JSONValue {
        .object([
            "id": .string(id), "type": .string(type), "occurred_at": .string(occurredAt), "account_id": .string(accountId), "data": data,
        ])
    }
}
