internal import COpenSSL

/// An RSA private key that signs RS256 and PS256 (RFC 7518 §3.3, §3.5).
///
/// Immutable after creation; safe to share between threads.
public final class RSAPrivateKey: Sendable {
    private let key: EVPKey
    /// The public half, sharing the same OpenSSL key object.
    public let publicKey: RSAPublicKey

    private init(key: EVPKey) throws(CryptoError) {
        self.key = key
        publicKey = try RSAPublicKey(key: key)
    }

    /// A fresh key pair with public exponent 65537.
    ///
    /// - Parameter bits: Modulus size in bits; at least 2048 (RFC 7518 §3.3). Default 2048.
    /// - Throws: `CryptoError` when `bits` is below 2048 or generation fails.
    public static func generate(bits: Int = 2048) throws -> RSAPrivateKey {
        guard bits >= 2048, bits <= 16384 else {
            throw CryptoError.invalidInput("RSAPrivateKey.generate", "bits must be between 2048 and 16384")
        }
        guard let pointer = cossl_rsa_gen(UInt32(bits)) else { throw CryptoError.openSSL("EVP_RSA_gen") }
        return try RSAPrivateKey(key: EVPKey(taking: pointer))
    }

    /// A key from a PEM `PRIVATE KEY` (PKCS#8) or `RSA PRIVATE KEY` (PKCS#1) block, unencrypted.
    ///
    /// - Throws: `CryptoError` when the PEM does not parse or holds no RSA key.
    public convenience init(pem: String) throws {
        let bio = try MemoryBIO(reading: pem)
        guard let pointer = PEM_read_bio_PrivateKey(bio.pointer, nil, nil, nil) else {
            throw CryptoError.openSSL("PEM_read_bio_PrivateKey")
        }
        try self.init(key: EVPKey(taking: pointer))
    }

    /// Signs `message` with `algorithm`.
    ///
    /// - Parameters:
    ///   - message: The bytes to sign (for a JWS, `ASCII(header "." payload)`, RFC 7515 §5.1).
    ///   - algorithm: RS256 or PS256.
    /// - Returns: The signature, as long as the modulus (256 bytes for 2048 bits).
    /// - Throws: `CryptoError` naming the failing OpenSSL call.
    public func sign(_ message: [UInt8], algorithm: SignatureAlgorithm) throws -> [UInt8] {
        try key.sign(message, algorithm: algorithm)
    }

    /// The key as an unencrypted PEM `PRIVATE KEY` (PKCS#8, RFC 5208) block. The result is secret:
    /// never log it.
    public func pemRepresentation() throws -> String {
        let bio = try MemoryBIO()
        try checkOpenSSL(
            PEM_write_bio_PKCS8PrivateKey(bio.pointer, key.pointer, nil, nil, 0, nil, nil), "PEM_write_bio_PKCS8PrivateKey")
        return bio.text
    }
}
