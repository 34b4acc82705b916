import Foundation
import IdentityCore
import PostgresBridge
import TokenRelayBase
import TokenRelayServer
import TokenRelayStore

/// `token-relay encryption rotate|rewrap|create-kek` (behaviour §12 Encryption keys; ADR 0016, 0017).
extension CommandLineTool {
    /// What the encryption commands share: the ring, the key-encryption keys (the HSM's when
    /// configured) and a one-connection pool.
    package struct EncryptionTools {
        package let pool: PostgresPool
        package let database: Database
        package let cipher: TokenCipher
        package let dataKeys: TenantDataKeys
        package let logger: Logger
        package let batchSize: Int
    }

    package static func encryptionTools(_ arguments: [String], _ configuration: Configuration) throws -> EncryptionTools? {
        guard !configuration.database.url.isEmpty else {
            throw ConfigurationError(setting: "TOKENRELAY_DATABASE_URL", reason: "is required")
        }
        guard !configuration.identity.clientId.isEmpty else {
            throw ConfigurationError(setting: "TOKENRELAY_CLIENT_ID", reason: "is required")
        }
        let ring: KeyRing
        do { ring = try KeyRing(parsing: configuration.encryption.keys) } catch {
            throw ConfigurationError(setting: "TOKENRELAY_ENCRYPTION_KEYS", reason: error.description)
        }
        var batchSize = 500
        if let text = option("--batch-size", in: arguments) {
            guard let size = Int(text), (1...100_000).contains(size) else { return nil }
            batchSize = size
        }
        let hsmKeys = try configuration.encryption.pkcs11.map(HSMKeys.open) ?? []
        let pool = PostgresPool(url: configuration.database.url, size: 1)
        let database = Database(pool: pool)
        let dataKeys = TenantDataKeys(
            store: DataKeyStore(database: database), keys: KeyEncryptionKeys(ring: ring, hsm: hsmKeys),
            capacity: configuration.encryption.dataKeyCapacity, holdSeconds: Double(configuration.encryption.dataKeyHoldSeconds))
        return EncryptionTools(
            pool: pool, database: database, cipher: TokenCipher(ring: ring, dataKeys: dataKeys), dataKeys: dataKeys,
            logger: Logger(level: configuration.logging.level, logPII: configuration.logging.pii), batchSize: batchSize)
    }

    /// Rewraps data keys, then re-encrypts rows still under a ring key; prints one JSON object;
    /// exits 0 when nothing is left under an old key, 1 otherwise. Progress on standard error.
    package static func rotateEncryption(_ arguments: [String], _ configuration: Configuration) async throws -> Int32 {
        guard let tools = try encryptionTools(arguments, configuration) else { return usage("--batch-size must be an integer in 1...100000") }
        defer { tools.pool.close() }
        let store = CiphertextStore(database: tools.database, clientId: configuration.identity.clientId, cipher: tools.cipher)
        let report = try await KeyRotation(
            store: store, logger: tools.logger, batchSize: tools.batchSize, progress: CommandProgress(command: "encryption rotate")
        ).run()
        let done = report.remaining == 0 && (report.dataKeys?.remaining ?? 0) == 0
        try await AuditStore(database: tools.database).record(
            .encryptionRotated, actor: "cli", accountId: nil, outcome: done ? "success" : "incomplete", detail: report.json.objectValue ?? [:])
        printJSON(report.json)
        return done ? 0 : 1
    }

    /// Wraps every data key under the primary key-encryption key; rows are not touched. Prints
    /// `{kek_id, data_keys_rewrapped, data_keys_failed, data_keys_remaining, seconds}`; exits 0
    /// when none is left under another KEK. Progress on standard error.
    package static func rewrapDataKeys(_ arguments: [String], _ configuration: Configuration) async throws -> Int32 {
        guard let tools = try encryptionTools(arguments, configuration) else { return usage("--batch-size must be an integer in 1...100000") }
        defer { tools.pool.close() }
        let started = Date()
        let report = try await DataKeyRewrap(
            dataKeys: tools.dataKeys, store: DataKeyStore(database: tools.database), batchSize: tools.batchSize,
            progress: CommandProgress(command: "encryption rewrap")
        ).run()
        for id in report.failed { tools.logger.error("encryption.rewrap.data_key_failed", ["data_key_id": id]) }
        var detail = report.json.objectValue ?? [:]
        detail["seconds"] = .number((Date().timeIntervalSince(started) * 1000).rounded() / 1000)
        try await AuditStore(database: tools.database).record(
            .dataKeysRewrapped, actor: "cli", accountId: nil, outcome: report.remaining == 0 ? "success" : "incomplete", detail: detail)
        printJSON(.object(detail))
        return report.remaining == 0 ? 0 : 1
    }

    /// Makes the AES key of the first `TOKENRELAY_PKCS11_KEY_LABEL` inside the token (sensitive,
    /// not extractable) unless it exists. Prints `{key_label, created}`.
    package static func createKeyEncryptionKey(_ configuration: Configuration) throws -> Int32 {
        guard let settings = configuration.encryption.pkcs11 else {
            throw ConfigurationError(setting: "TOKENRELAY_PKCS11_MODULE", reason: "is required for create-kek (with the other TOKENRELAY_PKCS11_* settings)")
        }
        let created = try HSMKeys.createPrimary(settings)
        printJSON(.object(["key_label": .string(settings.keyLabels[0]), "created": .bool(created)]))
        return 0
    }
}
