import CryptoBridge
import PKCS11Bridge
import TokenRelayBase

/// Why a data key could not be wrapped or unwrapped. Never holds key bytes or a PIN.
package struct KeyWrapError: Error, CustomStringConvertible, Sendable {
    package enum Kind: Sendable {
        /// The wrapped bytes did not open under this key-encryption key: a wrong key, bytes moved
        /// to another tenant's row, or tampering. Retrying cannot help.
        case authenticationFailed
        /// The HSM did not answer as it should (device removed, session lost, any other `CKR_*`):
        /// retrying later may help.
        case unavailable
    }

    package let kind: Kind
    package let description: String
}

/// What wraps tenants' data keys (ADR 0017): AES-256-GCM under a key of the ring
/// (`TOKENRELAY_ENCRYPTION_KEYS`), or AES-256-GCM inside a PKCS#11 token under a key that never
/// leaves it (ADR 0016). Both give `nonce (12 bytes) ‖ ciphertext ‖ tag (16 bytes)`, so
/// `token-relay encryption rewrap` moves a data key from one to the other.
package struct KeyEncryptionKey: Sendable {
    package enum Source: Sendable {
        case ring(KeyRing.Key)
        case pkcs11(PKCS11Session, PKCS11Key)
    }

    /// What `data_keys.kek_id` stores: `ring:<key id>` or `pkcs11:<key label>`.
    package let id: String
    package let source: Source

    package init(ringKey: KeyRing.Key) {
        id = "ring:" + ringKey.id
        source = .ring(ringKey)
    }

    package init(session: PKCS11Session, key: PKCS11Key) {
        id = "pkcs11:" + key.label
        source = .pkcs11(session, key)
    }

    /// - Throws: ``KeyWrapError`` (`unavailable` when the HSM fails).
    package func wrap(_ dataKey: [UInt8], associatedData: [UInt8]) throws(KeyWrapError) -> [UInt8] {
        switch source {
        case .ring(let key):
            do {
                let sealed = try AES256GCM.seal(dataKey, key: key.bytes, authenticating: associatedData)
                return sealed.nonce + sealed.ciphertext
            } catch {
                throw KeyWrapError(kind: .unavailable, description: "wrapping under \(id) failed: \(error)")
            }
        case .pkcs11(let session, let key):
            do {
                return try session.seal(dataKey, key: key, associatedData: associatedData)
            } catch {
                throw KeyWrapError(kind: .unavailable, description: "wrapping under \(id) failed: \(error)")
            }
        }
    }

    /// - Throws: ``KeyWrapError``: `authenticationFailed` when the bytes do not open under this
    ///   key with this associated data, `unavailable` when the HSM fails.
    package func unwrap(_ wrapped: [UInt8], associatedData: [UInt8]) throws(KeyWrapError) -> [UInt8] {
        switch source {
        case .ring(let key):
            guard wrapped.count > AES256GCM.nonceByteCount else {
                throw KeyWrapError(kind: .authenticationFailed, description: "a wrapped data key of \(wrapped.count) bytes is too short")
            }
            do {
                return try AES256GCM.open(
                    Array(wrapped.dropFirst(AES256GCM.nonceByteCount)), nonce: Array(wrapped.prefix(AES256GCM.nonceByteCount)), key: key.bytes,
                    authenticating: associatedData)
            } catch {
                throw KeyWrapError(kind: .authenticationFailed, description: "a wrapped data key did not open under \(id)")
            }
        case .pkcs11(let session, let key):
            do {
                return try session.open(wrapped, key: key, associatedData: associatedData)
            } catch  where error.isAuthenticationFailure {
                throw KeyWrapError(kind: .authenticationFailed, description: "a wrapped data key did not open under \(id)")
            } catch {
                throw KeyWrapError(kind: .unavailable, description: "unwrapping under \(id) failed: \(error)")
            }
        }
    }
}

/// The key-encryption keys in use (ADR 0017): the first wraps new data keys and `rewrap`'s
/// output; every one unwraps. Without PKCS#11 settings they are the ring's keys, in the ring's
/// order; with them, the token's keys (`TOKENRELAY_PKCS11_KEY_LABEL`, first label first), then
/// the ring's keys, so data keys wrapped before the HSM was configured still open until rewrapped.
package struct KeyEncryptionKeys: Sendable {
    package let keys: [KeyEncryptionKey]

    package var primary: KeyEncryptionKey { keys[0] }

    package func key(id: String) -> KeyEncryptionKey? { keys.first { $0.id == id } }

    package init(ring: KeyRing, hsm: [KeyEncryptionKey] = []) {
        keys = hsm + ring.keys.map(KeyEncryptionKey.init(ringKey:))
    }

    /// The same HSM keys over another ring (SIGHUP).
    package func replacingRing(_ ring: KeyRing) -> KeyEncryptionKeys {
        KeyEncryptionKeys(ring: ring, hsm: keys.filter { if case .pkcs11 = $0.source { true } else { false } })
    }

    /// Whether the primary key is in an HSM.
    package var inHSM: Bool {
        if case .pkcs11 = primary.source { true } else { false }
    }
}
