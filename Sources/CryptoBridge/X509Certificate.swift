internal import COpenSSL
import Glibc

/// An X.509 certificate read from PEM (RFC 5280), as a confidential client's certificate
/// credential carries it: its DER bytes (for the `x5t` / `x5t#S256` thumbprints of RFC 7515
/// §4.1.7–8), its RSA public key and its validity end.
public struct X509Certificate: Sendable, Equatable {
    /// The certificate's DER encoding.
    public let der: [UInt8]
    /// The subject public key.
    public let publicKey: RSAPublicKey
    /// `notAfter`, in unix seconds.
    public let notAfter: Int

    /// The first `CERTIFICATE` block of `pem`; other blocks (a private key before it) are skipped.
    ///
    /// - Throws: `CryptoError` when no certificate parses or its key is not RSA.
    public init(pem: String) throws {
        let bio = try MemoryBIO(reading: pem)
        guard let certificate = PEM_read_bio_X509(bio.pointer, nil, nil, nil) else { throw CryptoError.openSSL("PEM_read_bio_X509") }
        defer { X509_free(certificate) }
        var buffer: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_X509(certificate, &buffer)
        guard length > 0, let buffer else { throw CryptoError.openSSL("i2d_X509") }
        der = Array(UnsafeBufferPointer(start: buffer, count: Int(length)))
        cossl_free(buffer)
        guard let key = X509_get_pubkey(certificate) else { throw CryptoError.openSSL("X509_get_pubkey") }
        publicKey = try RSAPublicKey(key: EVPKey(taking: key))
        var time = tm()
        guard let end = X509_get0_notAfter(certificate) else { throw CryptoError.openSSL("X509_get0_notAfter") }
        try checkOpenSSL(ASN1_TIME_to_tm(end, &time), "ASN1_TIME_to_tm")
        notAfter = Int(timegm(&time))
    }

    /// `x5t#S256`: base64url SHA-256 of the DER certificate (RFC 7515 §4.1.8).
    public var sha256Thumbprint: String { Base64URL.encode(SHA256.hash(der)) }

    /// `x5t`: base64url SHA-1 of the DER certificate (RFC 7515 §4.1.7).
    public var sha1Thumbprint: String { Base64URL.encode(SHA1.hash(der)) }

    public static func == (lhs: X509Certificate, rhs: X509Certificate) -> Bool { lhs.der == rhs.der }
}
