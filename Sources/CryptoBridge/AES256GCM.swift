internal import COpenSSL

/// AES-256 in Galois/Counter Mode (NIST SP 800-38D) with 96-bit nonces and 128-bit tags.
public enum AES256GCM {
    /// Key length in bytes.
    public static let keyByteCount = 32
    /// Nonce length in bytes (96 bits, the length SP 800-38D §8.2 recommends).
    public static let nonceByteCount = 12
    /// Authentication tag length in bytes, appended to the ciphertext.
    public static let tagByteCount = 16

    /// Seals `plaintext` with a fresh random nonce.
    ///
    /// - Parameters:
    ///   - plaintext: The bytes to encrypt (may be empty).
    ///   - key: 32 bytes.
    ///   - aad: Associated data that is authenticated but not encrypted (may be empty).
    /// - Returns: The 12-byte nonce and `ciphertext || tag` (plaintext length + 16 bytes).
    /// - Throws: `CryptoError` (`.invalidInput` for a wrong key length, `.library` otherwise).
    public static func seal(
        _ plaintext: [UInt8], key: [UInt8], authenticating aad: [UInt8]
    ) throws -> (nonce: [UInt8], ciphertext: [UInt8]) {
        guard key.count == keyByteCount else { throw CryptoError.invalidInput("AES256GCM.seal", "key must be 32 bytes") }
        let nonce = SecureRandom.bytes(nonceByteCount)
        let context = try CipherContext()
        try checkOpenSSL(EVP_EncryptInit_ex2(context.pointer, Algorithms.shared.aes256GCM, key, nonce, nil), "EVP_EncryptInit_ex2")
        var length: Int32 = 0
        if !aad.isEmpty {
            try checkOpenSSL(EVP_EncryptUpdate(context.pointer, nil, &length, aad, Int32(aad.count)), "EVP_EncryptUpdate")
        }
        var output = [UInt8](repeating: 0, count: plaintext.count + tagByteCount)
        var written = 0
        try output.withUnsafeMutableBufferPointer { out throws(CryptoError) in
            if !plaintext.isEmpty {
                try checkOpenSSL(
                    EVP_EncryptUpdate(context.pointer, out.baseAddress, &length, plaintext, Int32(plaintext.count)),
                    "EVP_EncryptUpdate")
                written = Int(length)
            }
            try checkOpenSSL(EVP_EncryptFinal_ex(context.pointer, out.baseAddress! + written, &length), "EVP_EncryptFinal_ex")
            written += Int(length)
            try checkOpenSSL(
                EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_GET_TAG, Int32(tagByteCount), out.baseAddress! + written),
                "EVP_CIPHER_CTX_ctrl(GET_TAG)")
        }
        precondition(written == plaintext.count, "GCM is a stream mode: output length equals input length")
        return (nonce, output)
    }

    /// Opens `ciphertext || tag` produced by `seal`.
    ///
    /// - Parameters:
    ///   - ciphertext: Ciphertext followed by the 16-byte tag.
    ///   - nonce: The 12-byte nonce `seal` returned.
    ///   - key: 32 bytes.
    ///   - aad: The associated data given to `seal`.
    /// - Returns: The plaintext.
    /// - Throws: `CryptoError.Kind.authenticationFailed` when the tag does not verify (wrong key,
    ///   nonce or aad, or tampered bytes); `.invalidInput` for wrong lengths.
    public static func open(
        _ ciphertext: [UInt8], nonce: [UInt8], key: [UInt8], authenticating aad: [UInt8]
    ) throws -> [UInt8] {
        guard key.count == keyByteCount else { throw CryptoError.invalidInput("AES256GCM.open", "key must be 32 bytes") }
        guard nonce.count == nonceByteCount else { throw CryptoError.invalidInput("AES256GCM.open", "nonce must be 12 bytes") }
        guard ciphertext.count >= tagByteCount else {
            throw CryptoError.invalidInput("AES256GCM.open", "ciphertext shorter than the tag")
        }
        let bodyCount = ciphertext.count - tagByteCount
        let context = try CipherContext()
        try checkOpenSSL(EVP_DecryptInit_ex2(context.pointer, Algorithms.shared.aes256GCM, key, nonce, nil), "EVP_DecryptInit_ex2")
        var length: Int32 = 0
        if !aad.isEmpty {
            try checkOpenSSL(EVP_DecryptUpdate(context.pointer, nil, &length, aad, Int32(aad.count)), "EVP_DecryptUpdate")
        }
        var output = [UInt8](repeating: 0, count: bodyCount + tagByteCount)  // + tag: never a zero-size buffer
        try ciphertext.withUnsafeBufferPointer { input throws(CryptoError) in
            try output.withUnsafeMutableBufferPointer { out throws(CryptoError) in
                var written = 0
                if bodyCount > 0 {
                    try checkOpenSSL(
                        EVP_DecryptUpdate(context.pointer, out.baseAddress, &length, input.baseAddress, Int32(bodyCount)),
                        "EVP_DecryptUpdate")
                    written = Int(length)
                }
                var tag = Array(input[bodyCount...])
                try checkOpenSSL(
                    EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_SET_TAG, Int32(tagByteCount), &tag),
                    "EVP_CIPHER_CTX_ctrl(SET_TAG)")
                try checkOpenSSL(
                    EVP_DecryptFinal_ex(context.pointer, out.baseAddress! + written, &length), "EVP_DecryptFinal_ex",
                    kind: .authenticationFailed)
            }
        }
        output.removeLast(tagByteCount)
        return output
    }
}

/// Owns an `EVP_CIPHER_CTX`.
private final class CipherContext {
    let pointer: OpaquePointer

    init() throws(CryptoError) {
        guard let context = EVP_CIPHER_CTX_new() else { throw CryptoError.openSSL("EVP_CIPHER_CTX_new") }
        pointer = context
    }

    deinit { EVP_CIPHER_CTX_free(pointer) }
}
