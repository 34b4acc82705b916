import CryptoBridge
import Synchronization

/// What a ciphertext is bound to (behaviour §7): additional authenticated data made of the owner,
/// the token kind and the client id, so that a row copied onto another account fails to open.
struct SealingContext: Sendable {
    enum Kind: String, Sendable {
        case refreshToken = "rt"
        case accessToken = "at"
        case pkceVerifier = "pkce"
    }

    let owner: String
    let kind: Kind
    let clientId: String

    var additionalData: [UInt8] { Array("tokenrelay.v1|\(owner)|\(kind.rawValue)|\(clientId)".utf8) }
}

/// A token as stored: key id, 96-bit nonce and ciphertext with its 16-byte tag.
struct SealedSecret: Sendable, Equatable {
    let keyId: String
    let nonce: [UInt8]
    let ciphertext: [UInt8]
}

struct TokenCipherError: Error, CustomStringConvertible {
    let description: String
}

/// AES-256-GCM envelope over the key ring: the first key seals, the stored key id opens.
///
/// Copies share one ring (replaced on SIGHUP by ``reload(_:)``) and one count of encryptions per
/// key id not yet written to `encryption_key_usage` (behaviour §12 Encryption keys).
struct TokenCipher: Sendable {
    private let shared: Shared

    init(ring: KeyRing) {
        shared = Shared(ring: ring)
    }

    /// The ring in use now.
    var ring: KeyRing { shared.ring.withLock { $0 } }

    /// Replaces the ring (SIGHUP): later seals use its first key, opens any of its keys.
    func reload(_ ring: KeyRing) {
        shared.ring.withLock { $0 = ring }
    }

    func seal(_ plaintext: String, for context: SealingContext) throws -> SealedSecret {
        let key = ring.primary
        let sealed = try AES256GCM.seal(Array(plaintext.utf8), key: key.bytes, authenticating: context.additionalData)
        shared.unflushed.withLock { $0[key.id, default: 0] += 1 }
        return SealedSecret(keyId: key.id, nonce: sealed.nonce, ciphertext: sealed.ciphertext)
    }

    /// - Throws: `TokenCipherError` when the key id is not in the ring or the tag does not verify
    ///   (wrong key, or the row was moved to another owner, kind or client).
    func open(_ sealed: SealedSecret, for context: SealingContext) throws -> String {
        guard let key = ring.key(id: sealed.keyId) else {
            throw TokenCipherError(description: "encryption key '\(sealed.keyId)' is not in the key ring")
        }
        do {
            let plaintext = try AES256GCM.open(sealed.ciphertext, nonce: sealed.nonce, key: key.bytes, authenticating: context.additionalData)
            return String(decoding: plaintext, as: UTF8.self)
        } catch {
            throw TokenCipherError(description: "a stored \(context.kind.rawValue) ciphertext failed authentication")
        }
    }

    /// Takes the encryptions counted since the last call, per key id (for a flush to the database).
    func takeUnflushedCounts() -> [String: Int64] {
        shared.unflushed.withLock { counts in
            defer { counts = [:] }
            return counts
        }
    }

    /// Puts counts back after a failed flush, so none is lost.
    func restoreUnflushedCounts(_ counts: [String: Int64]) {
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
