import Foundation
import HTTPCommon
import IdentityCore
import TokenRelayBase
import TokenRelayStore
import TokenRelayUpstream

/// `GET /v1/audit` (behaviour §12 Audit; `admin`): the audit trail, oldest first, paged by an
/// opaque cursor and filtered by `actor`, `action`, `account_id` and a time range; with `uti`
/// alone, who got that access token.
package enum AuditRoutes {
    package static let filters = ["actor", "action", "account_id", "since", "until"]

    package static func register(on router: inout Router, _ services: AppServices) {
        router.add("GET", "/v1/audit", access: .requires(.admin), query: .only(["cursor", "limit"] + filters + ["uti"])) { request in
            // The trail spans every tenant: a key limited to some may not read it.
            guard !request.context.access.limitsTenants else {
                throw RelayError(.forbidden, "The audit trail spans every tenant; this API key is limited to some.")
            }
            if let uti = try request.http.onlyQueryValue("uti") {
                return try await token(uti: uti, request.http, services: services)
            }
            let limit = try request.http.pageLimit()
            var after: Int64 = 0
            if let cursor = try request.http.onlyQueryValue("cursor"), !cursor.isEmpty {
                guard let decoded = Cursor.decode(cursor, signer: services.cursors) else {
                    throw RelayError.invalidRequest(field: "cursor", "'cursor' is not a cursor this service issued.")
                }
                after = decoded
            }
            let http = request.http
            let filter = try filter { name throws(RelayError) in try http.onlyQueryValue(name) }
            // One row more than asked tells whether another page exists.
            var page = try await services.audit.page(filter, afterId: after, limit: limit + 1)
            var next: JSONValue = .null
            if page.count > limit {
                page.removeLast()
                next = .string(Cursor.encode(page.last!.id, signer: services.cursors))
            }
            return .json(200, .object(["audit_events": .array(page.map(\.json)), "next_cursor": next]))
        }
    }

    /// The token record of `uti` (``AuditStore/token(uti:)``).
    /// - Throws: `RelayError` 400 naming `uti` (not a token identifier) or the first other
    ///   parameter given with it; 404 `not_found` when nothing is recorded of it.
    private static func token(uti: String, _ http: HTTPRequest, services: AppServices) async throws -> HTTPResponse {
        guard AccessTokenIdentifier.isIdentifier(uti) else {
            throw RelayError.invalidRequest(field: "uti", "'uti' must be an access token's uti claim: 1 to 128 base64url characters.")
        }
        if let other = http.query.first(where: { $0.name != "uti" }) {
            throw RelayError.invalidRequest(field: other.name, "'\(other.name)' cannot be combined with 'uti', which names one token.")
        }
        guard let token = try await services.audit.token(uti: uti) else {
            throw RelayError(
                .notFound,
                "No access token with this uti was obtained here (or its record is older than TOKENRELAY_AUDIT_RETENTION_DAYS, or it was opaque).",
                extensions: ["field": .string("uti")])
        }
        return .json(200, token)
    }

    /// The filters of a query (or of `token-relay audit export`'s options).
    /// - Parameter value: the value of a filter by its name in ``filters``, nil when not given.
    /// - Throws: `RelayError` 400 `invalid_request` naming the parameter: a value given twice,
    ///   empty, longer than 256 characters or holding a control character; an unknown `action`;
    ///   a time that is not RFC 3339; `until` not after `since`.
    package static func filter(_ value: (String) throws(RelayError) -> String?) throws(RelayError) -> AuditStore.Filter {
        func text(_ name: String) throws(RelayError) -> String? {
            guard let value = try value(name) else { return nil }
            guard !value.isEmpty, value.utf8.count <= 256, !value.containsControlCharacter else {
                throw RelayError.invalidRequest(field: name, "'\(name)' must be 1 to 256 characters without control characters.")
            }
            return value
        }
        var filter = AuditStore.Filter(actor: try text("actor"), action: try text("action"), accountId: try text("account_id"))
        if let action = filter.action, !AuditStore.actionNames.contains(action) {
            throw RelayError.invalidRequest(field: "action", "'action' must be one of: \(AuditStore.actionNames.sorted().joined(separator: ", ")).")
        }
        let since = try time("since", text("since"))
        let until = try time("until", text("until"))
        if let since, let until, until <= since {
            throw RelayError.invalidRequest(field: "until", "'until' must be later than 'since'.")
        }
        filter.since = since.map(Self.timestamp)
        filter.until = until.map(Self.timestamp)
        return filter
    }

    /// An RFC 3339 date-time (`2026-12-05T02:00:00Z`, fractional seconds and an offset allowed).
    /// - Throws: `RelayError` 400 `invalid_request` naming `field`.
    package static func time(_ field: String, _ text: String?) throws(RelayError) -> Date? {
        guard let text else { return nil }
        guard let date = RFC3339.parse(text) else {
            throw RelayError.invalidRequest(field: field, "'\(field)' must be an RFC 3339 date-time such as 2026-12-05T02:00:00Z.")
        }
        return date
    }

    /// The time as PostgreSQL reads a `timestamptz`: UTC, milliseconds.
    static func timestamp(_ date: Date) -> String { RFC3339.format(date) }

    /// Opaque, signed page cursor (``PageCursor``) of the last row id seen.
    package enum Cursor {
        package static func encode(_ id: Int64, signer: RingSigner) -> String { PageCursor.encode(position: id, prefix: "au:", signer: signer) }
        package static func decode(_ cursor: String, signer: RingSigner) -> Int64? { PageCursor.position(in: cursor, prefix: "au:", signer: signer) }
    }
}
