import IdentityCore
import TokenRelayBase

/// `token-relay encryption rotate` (behaviour §7, §12 Encryption keys; ADR 0017): rewraps every
/// tenant's data key under the primary key-encryption key, then re-encrypts every row still under
/// a ring key (rows of a tenant go to that tenant's data key; pending sign-ins to the ring's first
/// key), in batches of short transactions, while the service serves.
///
/// Run it after every replica serves with the ring `[new, old]`; when it reports
/// `rows_remaining: 0` and `data_keys_remaining: 0`, the old key can leave the ring.
package struct KeyRotation: Sendable {
    package let store: CiphertextStore
    package let logger: Logger
    /// Rows per transaction.
    package var batchSize = 500
    /// Full sweeps at most: a sweep skips rows locked by a concurrent refresh (which re-seals
    /// them itself), so a second sweep only finds rows written meanwhile under an old key.
    package var maxSweeps = 3
    /// Told each phase (the data keys, then each table's sweep) with the rows it has to do, then
    /// each batch done (the command line's progress).
    package var progress: (any ProgressSink)? = nil

    package init(
        store: CiphertextStore, logger: Logger, batchSize: Int = 500, maxSweeps: Int = 3, progress: (any ProgressSink)? = nil
    ) {
        self.store = store
        self.logger = logger
        self.batchSize = batchSize
        self.maxSweeps = maxSweeps
        self.progress = progress
    }

    package struct TableReport: Sendable {
        package var reencrypted = 0
        package var failed = 0
        package var remaining = 0
    }

    package struct Report: Sendable {
        package let keyId: String
        package var tables: [(name: String, report: TableReport)] = []
        package var dataKeys: DataKeyRewrap.Report?

        package var reencrypted: Int { tables.reduce(0) { $0 + $1.report.reencrypted } }
        package var failed: Int { tables.reduce(0) { $0 + $1.report.failed } }
        package var remaining: Int { tables.reduce(0) { $0 + $1.report.remaining } }

        /// The JSON the command prints (and the audit row's detail).
        package var json: JSONValue {
            func number(_ value: Int) -> JSONValue { .number(Double(value)) }
            var perTable: [String: JSONValue] = [:]
            for (name, table) in tables {
                perTable[name] = .object(["reencrypted": number(table.reencrypted), "failed": number(table.failed), "remaining": number(table.remaining)])
            }
            var object: [String: JSONValue] = [
                "key_id": .string(keyId), "rows_reencrypted": number(reencrypted), "rows_failed": number(failed),
                "rows_remaining": number(remaining), "tables": .object(perTable),
            ]
            if let dataKeys, case .object(let members) = dataKeys.json { object.merge(members) { $1 } }
            return .object(object)
        }
    }

    /// - Parameter tables: the ciphertext column sets to visit (default: all of them).
    /// - Returns: rows re-encrypted, rows that did not open (left as they are, logged without
    ///   their content) and rows still under another key at the end.
    /// - Throws: `RelayError` when the database fails.
    package func run(tables: [CiphertextColumns] = CiphertextColumns.all) async throws -> Report {
        var report = Report(keyId: store.cipher.ring.primary.id)
        if let dataKeys = store.cipher.dataKeys {
            let rewrap = try await DataKeyRewrap(
                dataKeys: dataKeys, store: DataKeyStore(database: store.database), batchSize: batchSize, progress: progress
            ).run()
            for id in rewrap.failed { logger.error("encryption.rewrap.data_key_failed", ["data_key_id": id]) }
            report.dataKeys = rewrap
        }
        for columns in tables {
            var table = TableReport()
            // What the first sweep has to do (counted only for the progress); a later sweep's is
            // what the one before left.
            var toDo = progress == nil ? 0 : try await store.remaining(columns)
            for sweep in 0..<maxSweeps {
                progress?.begin(sweep == 0 ? columns.table : "\(columns.table) (sweep \(sweep + 1))", total: toDo)
                defer { progress?.end() }
                var cursor: [String]?
                var failedThisSweep: [(owner: String, keyId: String)] = []
                while true {
                    let batch = try await store.rotateBatch(columns, after: cursor, limit: batchSize)
                    table.reencrypted += batch.reencrypted
                    failedThisSweep += batch.failed
                    progress?.advance(by: batch.reencrypted + batch.failed.count)
                    guard let next = batch.cursor else { break }
                    cursor = next
                }
                table.failed = failedThisSweep.count
                table.remaining = try await store.remaining(columns)
                toDo = table.remaining
                if table.remaining <= table.failed {
                    for row in failedThisSweep {
                        logger.error("encryption.rotate.row_failed", ["table": columns.table, "owner.id": row.owner, "key_id": row.keyId])
                    }
                    break
                }
            }
            logger.info(
                "encryption.rotate.table",
                [
                    "table": columns.table, "rows.reencrypted": String(table.reencrypted), "rows.failed": String(table.failed),
                    "rows.remaining": String(table.remaining),
                ])
            report.tables.append((columns.table, table))
        }
        // The rotation's own encryptions count too; failing to record them must not hide the report.
        do { try await store.flushUsage() } catch { logger.warn("encryption.usage_flush_failed", ["error": String(describing: type(of: error))]) }
        return report
    }
}
