import Foundation
import PostgresBridge
import TokenRelayBase
import TokenRelayHTTP
import TokenRelayStore

/// `token-relay audit export` (behaviour §8.5, §12 Audit): the audit trail as JSON lines.
extension CommandLineTool {
    /// Rows read per statement.
    static let auditExportBatch = 1_000

    /// `audit export --since TIME [--until TIME] [--actor A] [--action X] [--account-id ID]`: every
    /// matching row, oldest first, one JSON object per line on standard output (the objects of
    /// `GET /v1/audit`); progress on standard error.
    package static func audit(_ arguments: [String], _ configuration: Configuration) async throws -> Int32 {
        guard arguments.first == "export" else { return usageError("audit export --since TIME", help: ["audit"]) }
        guard !configuration.database.url.isEmpty else {
            throw ConfigurationError(setting: "TOKENRELAY_DATABASE_URL", reason: "is required")
        }
        guard option("--since", in: arguments) != nil else { return usageError("audit export needs --since TIME", help: ["audit", "export"]) }
        let filter: AuditStore.Filter
        do {
            filter = try AuditRoutes.filter { name in option("--" + name.replacingOccurrences(of: "_", with: "-"), in: arguments) }
        } catch {
            let option = "--" + ((error.extensions["field"]?.stringValue) ?? "since").replacingOccurrences(of: "_", with: "-")
            return usageError("audit export: \(option): \(error.detail)", help: ["audit", "export"])
        }
        let pool = PostgresPool(url: configuration.database.url, size: 1)
        defer { pool.close() }
        let store = AuditStore(database: Database(pool: pool))
        let progress = CommandProgress(command: "audit export")
        progress.begin("audit events", total: try await store.count(filter))
        defer { progress.end() }
        var after: Int64 = 0
        while true {
            let page = try await store.page(filter, afterId: after, limit: auditExportBatch)
            var lines = ""
            for event in page { lines += String(decoding: JSONWriter.encode(event.json), as: UTF8.self) + "\n" }
            FileHandle.standardOutput.write(Data(lines.utf8))
            progress.advance(by: page.count)
            guard page.count == auditExportBatch, let last = page.last else { break }
            after = last.id
        }
        return 0
    }
}
