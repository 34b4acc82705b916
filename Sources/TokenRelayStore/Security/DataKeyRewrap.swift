import IdentityCore
import TokenRelayBase

/// `token-relay encryption rewrap` (ADR 0017): every data key not wrapped by the primary
/// key-encryption key is unwrapped with the key that wrapped it and wrapped again under the
/// primary, a batch at a time; no row of the token tables is touched. Safe while replicas serve
/// (each update is a compare-and-swap on the wrapping read) and to run again.
package struct DataKeyRewrap: Sendable {
    package let dataKeys: TenantDataKeys
    package let store: DataKeyStore
    /// Data keys per transaction.
    package var batchSize = 500
    /// Told the data keys to do, then each batch done (the command line's progress).
    package var progress: (any ProgressSink)? = nil

    package init(dataKeys: TenantDataKeys, store: DataKeyStore, batchSize: Int = 500, progress: (any ProgressSink)? = nil) {
        self.dataKeys = dataKeys
        self.store = store
        self.batchSize = batchSize
        self.progress = progress
    }

    package struct Report: Sendable, Equatable {
        package let kekId: String
        package var rewrapped = 0
        /// Keys that did not open (their KEK is not configured, or the bytes were altered):
        /// left as they are, logged by id.
        package var failed: [String] = []
        package var remaining = 0

        package var json: JSONValue {
            .object([
                "kek_id": .string(kekId), "data_keys_rewrapped": .number(Double(rewrapped)),
                "data_keys_failed": .number(Double(failed.count)), "data_keys_remaining": .number(Double(remaining)),
            ])
        }
    }

    /// - Throws: `RelayError` 503 when the HSM fails (what was rewrapped stays rewrapped); ``StoreError``.
    package func run() async throws -> Report {
        let primary = dataKeys.keyEncryptionKeys.primary
        var report = Report(kekId: primary.id)
        if let progress {
            progress.begin("data_keys", total: try await store.countByKEK().filter { $0.key != primary.id }.values.reduce(0, +))
        }
        defer { progress?.end() }
        var cursor: String?
        while true {
            let batch = try await store.notWrappedBy(primary.id, after: cursor, limit: batchSize)
            guard let last = batch.last else { break }
            defer { progress?.advance(by: batch.count) }
            cursor = last.dataKeyId
            var changes: [(old: WrappedDataKey, new: WrappedDataKey)] = []
            for old in batch {
                let key: DataKey
                do { key = try dataKeys.unwrap(old) } catch let problem as RelayError where problem.code == .upstreamUnavailable {
                    throw problem
                } catch {
                    report.failed.append(old.dataKeyId)
                    continue
                }
                let wrapped: [UInt8]
                do { wrapped = try primary.wrap(key.bytes, associatedData: old.associatedData) } catch { throw TenantDataKeys.problem(error) }
                changes.append((old, WrappedDataKey(dataKeyId: old.dataKeyId, tenantId: old.tenantId, kekId: primary.id, wrapped: wrapped)))
            }
            report.rewrapped += try await store.replaceWrapping(changes)
        }
        report.remaining = try await store.countByKEK().filter { $0.key != primary.id }.values.reduce(0, +)
        return report
    }
}
