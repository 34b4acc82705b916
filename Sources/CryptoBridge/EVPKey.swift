internal import COpenSSL

/// Owns one `EVP_PKEY` and frees it in `deinit`.
///
/// An `EVP_PKEY` that is no longer modified may be used for signing and verifying from several
/// threads at once (OpenSSL 3 threading guide), hence `@unchecked Sendable`.
final class EVPKey: @unchecked Sendable {
    let pointer: OpaquePointer

    init(taking pointer: OpaquePointer) { self.pointer = pointer }

    deinit { EVP_PKEY_free(pointer) }

    /// True when the key is an RSA key (plain RSA, not RSA-PSS-restricted).
    var isRSA: Bool { EVP_PKEY_is_a(pointer, "RSA") == 1 }

    /// A big-number parameter (e.g. `n`, `e`) as minimal big-endian bytes.
    func bigNumberParameter(_ name: String) throws(CryptoError) -> [UInt8] {
        var number: OpaquePointer? = nil
        try checkOpenSSL(EVP_PKEY_get_bn_param(pointer, name, &number), "EVP_PKEY_get_bn_param(\(name))")
        defer { BN_free(number) }
        var bytes = [UInt8](repeating: 0, count: Int(cossl_bn_num_bytes(number)))
        _ = BN_bn2bin(number, &bytes)
        return bytes
    }

    /// Signs `message` (hashing it with SHA-256 first).
    func sign(_ message: [UInt8], algorithm: SignatureAlgorithm) throws(CryptoError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw CryptoError.openSSL("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer? = nil
        try checkOpenSSL(EVP_DigestSignInit_ex(context, &keyContext, "SHA256", nil, nil, pointer, nil), "EVP_DigestSignInit_ex")
        try Self.configurePadding(keyContext, algorithm)
        var length = 0
        try checkOpenSSL(EVP_DigestSign(context, nil, &length, message, message.count), "EVP_DigestSign")
        var signature = [UInt8](repeating: 0, count: length)
        try checkOpenSSL(EVP_DigestSign(context, &signature, &length, message, message.count), "EVP_DigestSign")
        signature.removeLast(signature.count - length)
        return signature
    }

    /// True when `signature` is valid for `message`; any failure (malformed signature, wrong
    /// length, OpenSSL error) is false.
    func verify(_ signature: [UInt8], for message: [UInt8], algorithm: SignatureAlgorithm) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer {
            EVP_MD_CTX_free(context)
            ERR_clear_error()  // a failed verification leaves entries on the thread's queue
        }
        var keyContext: OpaquePointer? = nil
        guard EVP_DigestVerifyInit_ex(context, &keyContext, "SHA256", nil, nil, pointer, nil) == 1 else { return false }
        guard (try? Self.configurePadding(keyContext, algorithm)) != nil else { return false }
        return EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
    }

    private static func configurePadding(_ keyContext: OpaquePointer?, _ algorithm: SignatureAlgorithm) throws(CryptoError) {
        switch algorithm {
        case .rs256:
            try checkOpenSSL(EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PADDING), "EVP_PKEY_CTX_set_rsa_padding")
        case .ps256:
            try checkOpenSSL(EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING), "EVP_PKEY_CTX_set_rsa_padding")
            // RFC 7518 §3.5: the salt is as long as the hash output.
            try checkOpenSSL(
                EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, RSA_PSS_SALTLEN_DIGEST), "EVP_PKEY_CTX_set_rsa_pss_saltlen")
        }
    }
}

/// Owns a memory `BIO`.
final class MemoryBIO {
    let pointer: OpaquePointer

    /// A read-only BIO over a copy of `text`'s UTF-8 bytes.
    init(reading text: String) throws(CryptoError) {
        let bytes = Array(text.utf8)
        guard let bio = BIO_new(BIO_s_mem()) else { throw CryptoError.openSSL("BIO_new") }
        pointer = bio
        if !bytes.isEmpty {
            guard BIO_write(bio, bytes, Int32(bytes.count)) == Int32(bytes.count) else { throw CryptoError.openSSL("BIO_write") }
        }
    }

    /// An empty, writable BIO.
    init() throws(CryptoError) {
        guard let bio = BIO_new(BIO_s_mem()) else { throw CryptoError.openSSL("BIO_new") }
        pointer = bio
    }

    deinit { BIO_free(pointer) }

    /// Everything written so far, as UTF-8 text.
    var text: String {
        var data: UnsafeMutablePointer<CChar>? = nil
        let length = cossl_bio_get_mem_data(pointer, &data)
        guard let data, length > 0 else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    }
}
