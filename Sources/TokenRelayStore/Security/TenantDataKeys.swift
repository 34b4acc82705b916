import CryptoBridge
import Foundation
import Synchronization
import TokenRelayBase

/// One tenant's data key, unwrapped: 32 bytes that seal and open the tenant's rows (AES-256-GCM,
/// as ``TokenCipher`` always has). Held in memory only.
package struct DataKey: Sendable {
    /// `dk.` and 24 hex digits (`data_keys.data_key_id`, the rows' `key_id`).
    package let id: String
    package let tenantId: String
    package let bytes: [UInt8]

    /// Whether a stored `key_id` names a data key rather than a ring key (ring ids have no '.').
    package static func isDataKeyId(_ keyId: String) -> Bool { keyId.hasPrefix("dk.") }
}

/// Per-tenant data keys (issue 12 part 1, ADR 0017): made on a tenant's first write, stored in
/// `data_keys` wrapped by the primary key-encryption key, unwrapped on first use and then held
/// in memory (at most `capacity` keys, each for `holdSeconds`), so the HSM is called once per
/// tenant and hold period, never once per request. No database connection is held while a
/// key-encryption key works (the HSM may be across a network).
package final class TenantDataKeys: Sendable {
    private let store: DataKeyStore
    private let keys: Mutex<KeyEncryptionKeys>
    /// `t|<tenant>` and `k|<data key id>` both map to the key.
    private let memory: ExpiringMap<String, DataKey>
    /// Seconds an unwrapped key stays in memory (`TOKENRELAY_DATA_KEY_HOLD_S`).
    package let holdSeconds: Double
    private let clock: RelayClock
    private let unwraps = Atomic<Int>(0)

    package init(
        store: DataKeyStore, keys: KeyEncryptionKeys, capacity: Int = 10_000, holdSeconds: Double = 3600,
        clock: RelayClock = .system
    ) {
        self.store = store
        self.keys = Mutex(keys)
        memory = ExpiringMap(capacity: capacity * 2)
        self.holdSeconds = holdSeconds
        self.clock = clock
    }

    /// The key-encryption keys in use now.
    package var keyEncryptionKeys: KeyEncryptionKeys { keys.withLock { $0 } }

    /// Takes a new ring (SIGHUP): new data keys are wrapped under its first key unless an HSM
    /// key is primary; data keys already in memory stay.
    package func reload(ring: KeyRing) {
        keys.withLock { $0 = $0.replacingRing(ring) }
    }

    /// Data keys unwrapped by this process so far (tests, metrics): how often the KEK was asked.
    package var unwrapCount: Int { unwraps.load(ordering: .relaxed) }

    /// The tenant's key if it is in memory.
    package func cached(tenantId: String) -> DataKey? { memory.value(for: "t|" + tenantId, now: clock.unixTime) }

    /// The key of that id if it is in memory.
    package func cached(dataKeyId: String) -> DataKey? { memory.value(for: "k|" + dataKeyId, now: clock.unixTime) }

    /// The tenant's data key: from memory, else unwrapped from `data_keys`, else made, wrapped
    /// under the primary key-encryption key and stored (one winner when replicas race).
    /// - Throws: `RelayError` 503 `upstream_unavailable` when the HSM fails (with `Retry-After`);
    ///   500 `internal` when the stored key does not open; ``StoreError`` for the database.
    package func key(forTenant tenantId: String) async throws -> DataKey {
        if let key = cached(tenantId: tenantId) { return key }
        if let stored = try await store.find(tenantId: tenantId) { return try remember(unwrap(stored)) }
        let bytes = SecureRandom.bytes(AES256GCM.keyByteCount)
        let id = "dk." + SealedSecret.hex(SecureRandom.bytes(12))
        let kek = keyEncryptionKeys.primary
        let wrapped: [UInt8]
        do {
            wrapped = try kek.wrap(bytes, associatedData: WrappedDataKey.associatedData(dataKeyId: id, tenantId: tenantId))
        } catch {
            throw Self.problem(error)
        }
        let stored = try await store.insert(WrappedDataKey(dataKeyId: id, tenantId: tenantId, kekId: kek.id, wrapped: wrapped))
        if stored.dataKeyId == id { return remember(DataKey(id: id, tenantId: tenantId, bytes: bytes)) }
        return try remember(unwrap(stored))
    }

    /// The data key of that id: from memory, else unwrapped from `data_keys`.
    /// - Throws: `RelayError` 500 `internal` when no such key is stored (its tenant was forgotten)
    ///   or it does not open; 503 when the HSM fails; ``StoreError``.
    package func key(dataKeyId: String) async throws -> DataKey {
        if let key = cached(dataKeyId: dataKeyId) { return key }
        guard let stored = try await store.find(dataKeyId: dataKeyId) else {
            var problem = RelayError(.internal, "A stored secret is sealed under a data key that no longer exists.")
            problem.cause = "data_key.missing: data_key_id=\(dataKeyId) (its tenant was forgotten)"
            throw problem
        }
        return try remember(unwrap(stored))
    }

    /// Wraps 32 zero bytes under the primary key-encryption key: nil when it works now, else why
    /// not (readiness: an HSM failing while running is a `warn`, since cached keys still serve).
    package func probe() -> KeyWrapError? {
        do {
            _ = try keyEncryptionKeys.primary.wrap([UInt8](repeating: 0, count: AES256GCM.keyByteCount), associatedData: Array("tokenrelay.probe".utf8))
            return nil
        } catch {
            return error
        }
    }

    /// The store of wrapped keys (readiness counts keys still under an older key-encryption key).
    package var wrappedKeys: DataKeyStore { store }

    /// Drops the tenant's key from this replica's memory (after `tenants forget`).
    package func drop(tenantId: String) {
        if let key = memory.removeValue(for: "t|" + tenantId) { _ = memory.removeValue(for: "k|" + key.id) }
    }

    /// Drops every key from memory (notifications may have been missed: a forgotten tenant's key
    /// must not outlive the gap); each is unwrapped again on its next use.
    package func dropAll() { memory.removeAll() }

    /// Opens a stored data key with the key-encryption key that wrapped it.
    package func unwrap(_ stored: WrappedDataKey) throws -> DataKey {
        guard let kek = keyEncryptionKeys.key(id: stored.kekId) else {
            var problem = RelayError(.internal, "A tenant's data key is wrapped by a key-encryption key this service does not have; see the service log.")
            problem.cause = "data_key.kek_missing: data_key_id=\(stored.dataKeyId) kek_id=\(stored.kekId)"
            throw problem
        }
        do {
            let bytes = try kek.unwrap(stored.wrapped, associatedData: stored.associatedData)
            unwraps.add(1, ordering: .relaxed)
            return DataKey(id: stored.dataKeyId, tenantId: stored.tenantId, bytes: bytes)
        } catch {
            throw Self.problem(error, dataKeyId: stored.dataKeyId)
        }
    }

    private func remember(_ key: DataKey) -> DataKey {
        let time = clock.unixTime
        memory.set(key, for: "t|" + key.tenantId, expiresAt: time + holdSeconds, now: time)
        memory.set(key, for: "k|" + key.id, expiresAt: time + holdSeconds, now: time)
        return key
    }

    /// Seconds a caller is told to wait while the HSM fails.
    package static let retryAfterSeconds = 2

    package static func problem(_ error: KeyWrapError, dataKeyId: String? = nil) -> RelayError {
        var problem: RelayError
        switch error.kind {
        case .unavailable:
            problem = .unavailable("The key-encryption key (HSM) is unavailable; retry later.", retryAfterSeconds: retryAfterSeconds)
        case .authenticationFailed:
            problem = RelayError(.internal, "A tenant's data key could not be unwrapped; see the service log.")
        }
        problem.cause = "data_key.unwrap_failed: data_key_id=\(dataKeyId ?? "new"): \(error.description)"
        return problem
    }
}
