import CryptoBridge
import HTTPCommon
import IdentityCore
import TokenRelayBase
import TokenRelayStore
import TokenRelayUpstream

/// `GET /v1/events?cursor=&limit=` (behaviour §12 Webhooks and events): account events in the order
/// they happened, paged by an opaque cursor.
package enum EventRoutes {
    package static func register(on router: inout Router, _ services: AppServices) {
        router.add("GET", "/v1/events", access: .requires(.accountsRead), query: .only(["cursor", "limit"])) { request in
            let limit = try request.http.pageLimit()
            var after: Int64 = 0
            let cursor = try request.http.onlyQueryValue("cursor").flatMap { $0.isEmpty ? nil : $0 }
            if let cursor {
                guard let decoded = Cursor.decode(cursor, signer: services.cursors) else {
                    throw RelayError.invalidRequest(field: "cursor", "'cursor' is not a cursor this service issued.")
                }
                after = decoded
            }
            let page = try await services.events.page(
                afterSeq: after, limit: limit, visibleTenants: request.context.access.visibleTenants)
            // The position after the last event returned: polling with it yields only newer events,
            // so a consumer keeps it even when a page comes back empty.
            let next: JSONValue = page.last.map { .string(Cursor.encode($0.seq, signer: services.cursors)) } ?? cursor.map(JSONValue.string) ?? .null
            return .json(200, .object(["events": .array(page.map(\.json)), "next_cursor": next]))
        }
    }

    /// Opaque, signed page cursor (``PageCursor``) of the last event position seen.
    package enum Cursor {
        package static func encode(_ seq: Int64, signer: RingSigner) -> String { PageCursor.encode(position: seq, prefix: "e:", signer: signer) }
        package static func decode(_ cursor: String, signer: RingSigner) -> Int64? { PageCursor.position(in: cursor, prefix: "e:", signer: signer) }
    }
}
