import Foundation
import IdentityCore
import PostgresBridge
import TokenRelayBase
import TokenRelayHTTP
import TokenRelayServer
import TokenRelayStore

/// `token-relay accounts list|show|delete` and `token-relay keepalive --once` (behaviour §8, §12).
extension CommandLineTool {
    package static func accounts(_ arguments: [String], _ configuration: Configuration) async throws -> Int32 {
        guard !configuration.database.url.isEmpty else {
            throw ConfigurationError(setting: "TOKENRELAY_DATABASE_URL", reason: "is required")
        }
        let pool = PostgresPool(url: configuration.database.url, size: 1)
        defer { pool.close() }
        let store = AccountAdminStore(database: Database(pool: pool), clientId: configuration.identity.clientId.isEmpty ? nil : configuration.identity.clientId)
        switch arguments.first {
        case "list":
            let limitText = option("--limit", in: arguments)
            let limit = limitText.map { Int($0) ?? -1 } ?? 50
            guard (1...200).contains(limit) else { return usageError("accounts list: --limit must be an integer from 1 to 200", help: ["accounts", "list"]) }
            var after: String?
            if let cursor = option("--cursor", in: arguments), !cursor.isEmpty {
                guard let decoded = AccountRoutes.Cursor.decode(cursor) else {
                    return usageError("accounts list: --cursor is not a cursor this service issued", help: ["accounts", "list"])
                }
                after = decoded
            }
            // An empty value is the filter not given, as `username=` and `tenant_id=` are to
            // GET /v1/accounts (behaviour §7.4); `--username ''` matched no one.
            let username = option("--username", in: arguments).flatMap { $0.isEmpty ? nil : $0 }
            let tenantId = option("--tenant-id", in: arguments).flatMap { $0.isEmpty ? nil : $0 }
            if let tenantId, !TenantName.isTenant(tenantId) {
                return usageError("accounts list: --tenant-id must be a tenant id (a GUID) or a domain name", help: ["accounts", "list"])
            }
            var page = try await store.list(username: username, tenantId: tenantId, afterAccountId: after, limit: limit + 1)
            var next: JSONValue = .null
            if page.count > limit {
                page.removeLast()
                next = .string(AccountRoutes.Cursor.encode(page.last!.accountId))
            }
            let health = try await TokenStore.accountHealth(
                in: store.database, clientId: store.clientId, accountIds: page.map(\.accountId), keepAliveAfterDays: configuration.keepAlive.afterDays)
            let accounts = page.map { AccountRoutes.withHealth($0.operatorJSON, health[$0.accountId]) }
            printJSON(.object(["accounts": .array(accounts), "next_cursor": next]))
            return 0
        case "show":
            guard let id = positional(arguments) else { return usageError("accounts show needs ACCOUNT_ID", help: ["accounts", "show"]) }
            guard let account = try await store.account(id: id) else {
                FileHandle.standardError.write(Data("token-relay: no account \(id)\n".utf8))
                return 1
            }
            // Tokens given per API key for this account (behaviour §12 Audit), as far as flushed.
            let issuance = try await IssuanceStore(database: Database(pool: pool)).counts(accountId: account.accountId)
            // The refresh token's generation, lease and chain (ADR 0012): fingerprints, never the token.
            let refreshToken = try await store.refreshToken(of: account)
            let health = try await TokenStore.accountHealth(
                in: store.database, clientId: store.clientId, accountIds: [account.accountId], keepAliveAfterDays: configuration.keepAlive.afterDays)
            var shown = AccountRoutes.withHealth(account.operatorJSON, health[account.accountId])
            if case .object(var fields) = shown {
                fields["issuance"] = .array(issuance.map(\.json))
                fields["refresh_token"] = refreshToken?.json ?? .null
                shown = .object(fields)
            }
            printJSON(shown)
            return 0
        case "delete":
            guard let id = positional(arguments) else { return usageError("accounts delete needs ACCOUNT_ID", help: ["accounts", "delete"]) }
            // Like DELETE /v1/accounts/{id}: signs out in TokenRelay only, and is idempotent.
            let deleted = try await store.delete(id: id, actor: "cli")
            printJSON(.object(["account_id": .string(id), "deleted": .bool(deleted)]))
            return 0
        default:
            return usageError("accounts list|show|delete", help: ["accounts"])
        }
    }

    package static func keepAlive(_ arguments: [String], _ configuration: Configuration) async throws -> Int32 {
        // Only one pass on demand: in `serve` the pass runs on its own schedule.
        guard arguments.contains("--once") else { return usageError("keepalive needs --once", help: ["keepalive"]) }
        let logger = Logger(level: configuration.logging.level, logPII: configuration.logging.pii)
        let service = try TokenRelayService(configuration: configuration, logger: logger)
        defer { service.stop() }
        print(try await service.runKeepAlivePass(progress: CommandProgress(command: "keepalive")))
        return 0
    }

    /// The first argument after the sub-command that is not an option.
    private static func positional(_ arguments: [String]) -> String? {
        arguments.dropFirst().first { !$0.hasPrefix("-") }
    }

    /// Prints `value` as one line of JSON on standard output.
    package static func printJSON(_ value: JSONValue) {
        print(String(decoding: JSONWriter.encode(value), as: UTF8.self))
    }
}
