import CryptoBridge
import Synchronization
import TokenRelayBase

/// What a ciphertext is bound to (behaviour §7): additional authenticated data made of the owner,
/// the token kind and the client id, so that a row copied onto another account fails to open;
/// and the customer tenant whose data key seals it (ADR 0017).
package struct SealingContext: Sendable {
    package enum Kind: String, Sendable {
        case refreshToken = "rt"
        case accessToken = "at"
        case pkceVerifier = "pkce"
    }

    package let owner: String
    package let kind: Kind
    package let clientId: String
    /// The tenant whose data key seals it: an account's `realm` (the tenant it signed in to), an
    /// app or on-behalf-of token's realm. Nil seals under the ring's first key (a pending
    /// sign-in's PKCE verifier, which has no tenant yet and lives ten minutes).
    package var tenantId: String?

    package init(owner: String, kind: Kind, clientId: String, tenantId: String? = nil) {
        self.owner = owner
        self.kind = kind
        self.clientId = clientId
        self.tenantId = tenantId?.lowercased()
    }

    /// `tokenrelay.v1|{owner}|{kind}|{clientId}` in UTF-8, put together as bytes: an interpolated
    /// `String` made first cost twice as much (a forced refresh seals two tokens and opens one, behaviour §10).
    package var additionalData: [UInt8] {
        var bytes = Array("tokenrelay.v1|".utf8)
        bytes.reserveCapacity(bytes.count + owner.utf8.count + clientId.utf8.count + 6)
        bytes += owner.utf8
        bytes.append(UInt8(ascii: "|"))
        bytes += kind.rawValue.utf8
        bytes.append(UInt8(ascii: "|"))
        bytes += clientId.utf8
        return bytes
    }
}

/// A token as stored: key id, 96-bit nonce and ciphertext with its 16-byte tag.
package struct SealedSecret: Sendable, Equatable {
    package let keyId: String
    package let nonce: [UInt8]
    package let ciphertext: [UInt8]
}

package struct TokenCipherError: Error, CustomStringConvertible {
    package let description: String
}

/// Thrown by ``TokenCipher`` when a data key it needs is not in memory. ``Database`` catches it
/// once the connection is back in the pool, runs ``load`` (the database and the key-encryption
/// key, with no connection held) and runs the statement again.
package struct DataKeyNeeded: Error, CustomStringConvertible {
    package let description: String
    package let load: @Sendable () async throws -> Void
}

/// AES-256-GCM over each row: sealed under its tenant's data key (ADR 0017) when the context names
/// a tenant, else under the ring's first key; opened by the stored key id, a data key's
/// (`dk.…`) or a ring key's.
///
/// Copies share one ring (replaced on SIGHUP by ``reload(_:)``), the data keys and one count of
/// encryptions per key id not yet written to `encryption_key_usage` (behaviour §12 Encryption keys).
package struct TokenCipher: Sendable {
    private let shared: Shared
    /// Nil seals everything under the ring (tools that only read or re-seal ring rows).
    package let dataKeys: TenantDataKeys?

    package init(ring: KeyRing, dataKeys: TenantDataKeys? = nil) {
        shared = Shared(ring: ring)
        self.dataKeys = dataKeys
    }

    /// The ring in use now.
    package var ring: KeyRing { shared.ring.withLock { $0 } }

    /// Replaces the ring (SIGHUP): later seals use its first key, opens any of its keys.
    package func reload(_ ring: KeyRing) {
        shared.ring.withLock { $0 = ring }
        dataKeys?.reload(ring: ring)
    }

    /// - Throws: ``DataKeyNeeded`` when the tenant's data key is not in memory.
    package func seal(_ plaintext: String, for context: SealingContext) throws -> SealedSecret {
        let (keyId, bytes) = try sealingKey(for: context)
        let sealed = try AES256GCM.seal(Array(plaintext.utf8), key: bytes, authenticating: context.additionalData)
        shared.unflushed.withLock { $0[keyId, default: 0] += 1 }
        return SealedSecret(keyId: keyId, nonce: sealed.nonce, ciphertext: sealed.ciphertext)
    }

    /// ``seal(_:for:)`` that loads the tenant's data key when it is not in memory (outside any
    /// database call).
    package func seal(loading plaintext: String, for context: SealingContext) async throws -> SealedSecret {
        try await loadingIfNeeded { try seal(plaintext, for: context) }
    }

    /// Runs `body`; when it needs a data key not in memory, loads the key (no connection held)
    /// and runs `body` once more.
    private func loadingIfNeeded<T>(_ body: () throws -> T) async throws -> T {
        do {
            return try body()
        } catch let needed as DataKeyNeeded {
            try await needed.load()
            return try body()
        }
    }

    private func sealingKey(for context: SealingContext) throws -> (id: String, bytes: [UInt8]) {
        guard let dataKeys, let tenantId = context.tenantId else {
            let key = ring.primary
            return (key.id, key.bytes)
        }
        guard let key = dataKeys.cached(tenantId: tenantId) else {
            throw DataKeyNeeded(description: "the data key of tenant \(tenantId) is not in memory") { _ = try await dataKeys.key(forTenant: tenantId) }
        }
        return (key.id, key.bytes)
    }

    /// - Throws: ``DataKeyNeeded`` when the row's data key is not in memory; `TokenCipherError`
    ///   when the key id is neither in the ring nor a data key, or the tag does not verify (wrong
    ///   key, or the row was moved to another owner, kind or client).
    package func open(_ sealed: SealedSecret, for context: SealingContext) throws -> String {
        let bytes: [UInt8]
        if DataKey.isDataKeyId(sealed.keyId) {
            guard let dataKeys else { throw TokenCipherError(description: "'\(sealed.keyId)' is a data key; this tool has no data keys") }
            guard let key = dataKeys.cached(dataKeyId: sealed.keyId) else {
                let id = sealed.keyId
                throw DataKeyNeeded(description: "data key \(id) is not in memory") { _ = try await dataKeys.key(dataKeyId: id) }
            }
            bytes = key.bytes
        } else {
            guard let key = ring.key(id: sealed.keyId) else {
                throw TokenCipherError(description: "encryption key '\(sealed.keyId)' is not in the key ring")
            }
            bytes = key.bytes
        }
        do {
            let plaintext = try AES256GCM.open(sealed.ciphertext, nonce: sealed.nonce, key: bytes, authenticating: context.additionalData)
            return String(decoding: plaintext, as: UTF8.self)
        } catch {
            throw TokenCipherError(description: "a stored \(context.kind.rawValue) ciphertext failed authentication")
        }
    }

    /// ``open(_:for:)`` where a row that does not open is a miss (nil), not an error; a data key
    /// not in memory still throws ``DataKeyNeeded``, so that it is loaded, never taken for a miss.
    package func openIfPossible(_ sealed: SealedSecret, for context: SealingContext) throws(DataKeyNeeded) -> String? {
        do {
            return try open(sealed, for: context)
        } catch let needed as DataKeyNeeded {
            throw needed
        } catch {
            return nil
        }
    }

    /// ``open(_:for:)`` that loads a data key not in memory (outside any database call).
    package func open(loading sealed: SealedSecret, for context: SealingContext) async throws -> String {
        try await loadingIfNeeded { try open(sealed, for: context) }
    }

    /// Takes the encryptions counted since the last call, per key id (for a flush to the database).
    package func takeUnflushedCounts() -> [String: Int64] {
        shared.unflushed.withLock { counts in
            defer { counts = [:] }
            return counts
        }
    }

    /// The counts not yet written, left in place (readiness reads them; the flush takes them).
    package var unflushedCounts: [String: Int64] { shared.unflushed.withLock { $0 } }

    /// Puts counts back after a failed flush, so none is lost.
    package func restoreUnflushedCounts(_ counts: [String: Int64]) {
        shared.unflushed.withLock { current in
            for (id, count) in counts { current[id, default: 0] += count }
        }
    }

    private final class Shared: Sendable {
        let ring: Mutex<KeyRing>
        let unflushed = Mutex<[String: Int64]>([:])
        init(ring: KeyRing) { self.ring = Mutex(ring) }
    }
}
