internal import COpenSSL

/// An RSA public key that verifies RS256 and PS256 signatures (RFC 7518 §3.3, §3.5).
public struct RSAPublicKey: Sendable, Equatable {
    let key: EVPKey
    /// The modulus `n`, big-endian without leading zero bytes (JWK `n`, RFC 7518 §6.3.1.1).
    public let modulus: [UInt8]
    /// The public exponent `e`, big-endian without leading zero bytes (JWK `e`).
    public let exponent: [UInt8]

    /// A key from its modulus and exponent, as a JWK's `n` and `e` carry them after base64url
    /// decoding (RFC 7518 §6.3.1).
    ///
    /// - Parameters:
    ///   - modulus: Big-endian bytes of `n` (leading zeros allowed).
    ///   - exponent: Big-endian bytes of `e`.
    /// - Throws: `CryptoError` when either is empty or OpenSSL rejects the parameters.
    public init(modulus: [UInt8], exponent: [UInt8]) throws {
        guard !modulus.isEmpty, !exponent.isEmpty else {
            throw CryptoError.invalidInput("RSAPublicKey.init(modulus:exponent:)", "empty modulus or exponent")
        }
        let key = try Self.fromParameters(modulus: modulus, exponent: exponent)
        try self.init(key: key)
    }

    /// A key from a PEM `PUBLIC KEY` (SubjectPublicKeyInfo, RFC 5280 §4.1.2.7) block.
    ///
    /// - Throws: `CryptoError` when the PEM does not parse or holds no RSA key.
    public init(pem: String) throws {
        let bio = try MemoryBIO(reading: pem)
        guard let pointer = PEM_read_bio_PUBKEY(bio.pointer, nil, nil, nil) else {
            throw CryptoError.openSSL("PEM_read_bio_PUBKEY")
        }
        try self.init(key: EVPKey(taking: pointer))
    }

    init(key: EVPKey) throws(CryptoError) {
        guard key.isRSA else { throw CryptoError.invalidInput("RSAPublicKey", "not an RSA key") }
        self.key = key
        modulus = try key.bigNumberParameter(OSSL_PKEY_PARAM_RSA_N)
        exponent = try key.bigNumberParameter(OSSL_PKEY_PARAM_RSA_E)
    }

    /// Whether `signature` is a valid `algorithm` signature of `message`.
    ///
    /// - Parameters:
    ///   - signature: The raw signature bytes (a JWS signature after base64url decoding).
    ///   - message: The signed bytes (for a JWS, `ASCII(header "." payload)`, RFC 7515 §5.2).
    /// - Returns: False for any invalid, truncated or malformed signature.
    public func verify(signature: [UInt8], for message: [UInt8], algorithm: SignatureAlgorithm) -> Bool {
        key.verify(signature, for: message, algorithm: algorithm)
    }

    /// The key as a PEM `PUBLIC KEY` (SubjectPublicKeyInfo) block.
    public func pemRepresentation() throws -> String {
        let bio = try MemoryBIO()
        try checkOpenSSL(PEM_write_bio_PUBKEY(bio.pointer, key.pointer), "PEM_write_bio_PUBKEY")
        return bio.text
    }

    public static func == (lhs: RSAPublicKey, rhs: RSAPublicKey) -> Bool {
        lhs.modulus == rhs.modulus && lhs.exponent == rhs.exponent
    }

    private static var parameterN: UnsafePointer<CChar> { staticCString("n") }
    private static var parameterE: UnsafePointer<CChar> { staticCString("e") }

    private static func staticCString(_ text: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
    }

    private static func fromParameters(modulus: [UInt8], exponent: [UInt8]) throws(CryptoError) -> EVPKey {
        guard let builder = OSSL_PARAM_BLD_new() else { throw CryptoError.openSSL("OSSL_PARAM_BLD_new") }
        defer { OSSL_PARAM_BLD_free(builder) }
        let n = BN_bin2bn(modulus, Int32(modulus.count), nil)
        defer { BN_free(n) }
        let e = BN_bin2bn(exponent, Int32(exponent.count), nil)
        defer { BN_free(e) }
        guard n != nil, e != nil else { throw CryptoError.openSSL("BN_bin2bn") }
        // The builder keeps the key-name pointer until `OSSL_PARAM_BLD_to_param`, so a bridged Swift
        // String (valid only during the call) will not do: use static storage. Values as
        // OSSL_PKEY_PARAM_RSA_N / _E.
        try checkOpenSSL(OSSL_PARAM_BLD_push_BN(builder, Self.parameterN, n), "OSSL_PARAM_BLD_push_BN(n)")
        try checkOpenSSL(OSSL_PARAM_BLD_push_BN(builder, Self.parameterE, e), "OSSL_PARAM_BLD_push_BN(e)")
        guard let parameters = OSSL_PARAM_BLD_to_param(builder) else { throw CryptoError.openSSL("OSSL_PARAM_BLD_to_param") }
        defer { OSSL_PARAM_free(parameters) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "RSA", nil) else {
            throw CryptoError.openSSL("EVP_PKEY_CTX_new_from_name")
        }
        defer { EVP_PKEY_CTX_free(context) }
        try checkOpenSSL(EVP_PKEY_fromdata_init(context), "EVP_PKEY_fromdata_init")
        var pointer: OpaquePointer? = nil
        try checkOpenSSL(
            EVP_PKEY_fromdata(context, &pointer, cossl_selection_public_key(), parameters), "EVP_PKEY_fromdata")
        guard let pointer else { throw CryptoError.openSSL("EVP_PKEY_fromdata") }
        return EVPKey(taking: pointer)
    }
}
