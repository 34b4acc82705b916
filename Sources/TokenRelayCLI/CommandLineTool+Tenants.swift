import Foundation
import IdentityCore
import PostgresBridge
import TokenRelayBase
import TokenRelayHTTP
import TokenRelayServer
import TokenRelayStore

/// `token-relay tenants suspend|resume TENANT_ID` and `tenants list` (behaviour §8, §12 Tenants):
/// the same rows, audit entries and replica notifications as the `/v1/tenants` routes, actor `cli`;
/// `tenants forget TENANT_ID --yes|--dry-run` (ADR 0017: crypto-shredding; progress on standard error).
extension CommandLineTool {
    package static func tenants(_ arguments: [String], _ configuration: Configuration) async throws -> Int32 {
        guard !configuration.database.url.isEmpty else {
            throw ConfigurationError(setting: "TOKENRELAY_DATABASE_URL", reason: "is required")
        }
        let pool = PostgresPool(url: configuration.database.url, size: 1)
        defer { pool.close() }
        let clientId = configuration.identity.clientId
        let store = TenantStore(database: Database(pool: pool), clientId: clientId.isEmpty ? nil : clientId)
        switch arguments.first {
        case "suspend", "resume":
            let command = arguments[0]
            guard let text = arguments.dropFirst().first(where: { !$0.hasPrefix("-") }) else {
                return usageError("tenants \(command) needs TENANT_ID", help: ["tenants", command])
            }
            let tenantId: String
            do { tenantId = try TenantRoutes.tenantId(text) } catch {
                return usageError("tenants \(command): TENANT_ID must be a tenant id (a GUID)", help: ["tenants", command])
            }
            let changed =
                command == "suspend" ? try await store.suspend(tenantId: tenantId, actor: "cli") : try await store.resume(tenantId: tenantId, actor: "cli")
            guard case .object(var shown) = try await store.tenant(tenantId).json else { return 1 }
            shown["changed"] = .bool(changed)
            printJSON(.object(shown))
            return 0
        case "forget":
            guard let text = arguments.dropFirst().first(where: { !$0.hasPrefix("-") }) else {
                return usageError("tenants forget needs TENANT_ID", help: ["tenants", "forget"])
            }
            let tenantId: String
            do { tenantId = try TenantRoutes.tenantId(text) } catch {
                return usageError("tenants forget: TENANT_ID must be a tenant id (a GUID)", help: ["tenants", "forget"])
            }
            // Each says the opposite of the other: neither is taken for the caller (both made a dry run).
            if arguments.contains("--dry-run") && arguments.contains("--yes") {
                return usageError("tenants forget takes --yes or --dry-run, not both", help: ["tenants", "forget"])
            }
            if arguments.contains("--dry-run") {
                // What would go, read in one snapshot; nothing is deleted, locked or audited.
                guard case .object(var shown) = try await store.forgetPlan(tenantId: tenantId).json else { return 1 }
                shown["tenant_id"] = .string(tenantId)
                printJSON(.object(shown))
                return 0
            }
            guard arguments.contains("--yes") else {
                return usageError(
                    "tenants forget deletes every account of \(tenantId) and destroys its data key; this cannot be undone: add --yes (or see what would go with --dry-run)",
                    help: ["tenants", "forget"])
            }
            let forgotten = try await store.forget(tenantId: tenantId, actor: "cli", progress: CommandProgress(command: "tenants forget"))
            guard case .object(var shown) = forgotten.json else { return 1 }
            shown["tenant_id"] = .string(tenantId)
            printJSON(.object(shown))
            return 0
        case "list":
            let limit = option("--limit", in: arguments).map { Int($0) ?? -1 } ?? 50
            guard (1...200).contains(limit) else { return usageError("tenants list: --limit must be an integer from 1 to 200", help: ["tenants", "list"]) }
            var after: String?
            if let cursor = option("--cursor", in: arguments), !cursor.isEmpty {
                guard let decoded = TenantRoutes.Cursor.decode(cursor) else {
                    return usageError("tenants list: --cursor is not a cursor this service issued", help: ["tenants", "list"])
                }
                after = decoded
            }
            var page = try await store.list(afterTenantId: after, limit: limit + 1)
            var next: JSONValue = .null
            if page.count > limit {
                page.removeLast()
                next = .string(TenantRoutes.Cursor.encode(page.last!.tenantId))
            }
            printJSON(.object(["tenants": .array(page.map(\.json)), "next_cursor": next]))
            return 0
        default:
            return usageError("tenants suspend|resume|forget|list", help: ["tenants"])
        }
    }
}
