import CryptoBridge

/// Unguessable values for identifiers, `state`, `nonce` and PKCE verifiers.
package enum RandomToken {
    /// `bytes` random bytes from OpenSSL's CSPRNG, base64url without padding.
    package static func make(bytes: Int) -> String {
        Base64URL.encode(SecureRandom.bytes(bytes))
    }
}
