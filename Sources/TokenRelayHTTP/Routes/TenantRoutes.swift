import CryptoBridge
import Foundation
import HTTPCommon
import IdentityCore
import TokenRelayBase
import TokenRelayUpstream

/// `POST /v1/tenants/{tenant_id}/suspend`, `POST /v1/tenants/{tenant_id}/resume` and
/// `GET /v1/tenants` (behaviour §12 Tenants; `admin`).
package enum TenantRoutes {
    package static func register(on router: inout Router, _ services: AppServices) {
        router.add("POST", "/v1/tenants/{tenant_id}/suspend", access: .requires(.admin)) { request in
            try await change(request, suspend: true, services: services)
        }
        router.add("POST", "/v1/tenants/{tenant_id}/resume", access: .requires(.admin)) { request in
            try await change(request, suspend: false, services: services)
        }
        router.add("GET", "/v1/tenants", access: .requires(.admin), query: .only(["cursor", "limit"])) { request in
            let limit = try request.http.pageLimit()
            var after: String?
            if let cursor = try request.http.onlyQueryValue("cursor"), !cursor.isEmpty {
                guard let decoded = Cursor.decode(cursor) else {
                    throw RelayError.invalidRequest(field: "cursor", "'cursor' is not a cursor this service issued.")
                }
                after = decoded
            }
            // One row more than asked tells whether another page exists.
            var page = try await services.tenants.list(afterTenantId: after, limit: limit + 1, visibleTenants: request.context.access.visibleTenants)
            var next: JSONValue = .null
            if page.count > limit {
                page.removeLast()
                next = .string(Cursor.encode(page.last!.tenantId))
            }
            return .json(200, .object(["tenants": .array(page.map(\.json)), "next_cursor": next]))
        }
    }

    /// Suspends or resumes the path's tenant, applies it to this replica at once (the others
    /// learn it from the notification sent at COMMIT), and answers the tenant object. Idempotent.
    /// - Throws: `RelayError` 400 naming `tenant_id` (not a GUID), 403 `forbidden` (a key limited to
    ///   other tenants), 503 when the database is unavailable.
    private static func change(_ request: RouteRequest, suspend: Bool, services: AppServices) async throws -> HTTPResponse {
        let tenantId = try tenantId(request.parameter("tenant_id"))
        try request.context.access.check(tenant: tenantId, field: "tenant_id")
        let actor = request.context.caller ?? "unknown"
        if suspend {
            _ = try await services.tenants.suspend(tenantId: tenantId, actor: actor)
        } else {
            _ = try await services.tenants.resume(tenantId: tenantId, actor: actor)
        }
        services.suspensions.apply(tenantId: tenantId, suspended: suspend)
        return .json(200, try await services.tenants.tenant(tenantId).json)
    }

    /// The tenant id of a path: a GUID (`8-4-4-4-12` hex digits, any case), lower-cased.
    /// - Throws: `RelayError` 400 `invalid_request` naming `tenant_id`.
    package static func tenantId(_ text: String) throws(RelayError) -> String {
        guard TenantName.isTenantId(text) else {
            throw RelayError.invalidRequest(field: "tenant_id", "'tenant_id' must be a tenant id (a GUID such as 72f988bf-86f1-41af-91ab-2d7cd011db47).")
        }
        return text.lowercased()
    }

    /// Opaque page cursor (``PageCursor``) of the last tenant id seen.
    package enum Cursor {
        package static func encode(_ tenantId: String) -> String { PageCursor.encode(tenantId, prefix: "t:") }
        package static func decode(_ cursor: String) -> String? { PageCursor.decode(cursor, prefix: "t:") }
    }
}
