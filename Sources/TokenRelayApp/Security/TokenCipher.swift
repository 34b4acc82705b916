import CryptoBridge

/// What a ciphertext is bound to (SPEC §7): additional authenticated data made of the owner,
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
struct TokenCipher: Sendable {
    let ring: KeyRing

    func seal(_ plaintext: String, for context: SealingContext) throws -> SealedSecret {
        let key = ring.primary
        let sealed = try AES256GCM.seal(Array(plaintext.utf8), key: key.bytes, authenticating: context.additionalData)
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
}
