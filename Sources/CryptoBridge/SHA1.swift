internal import COpenSSL

/// SHA-1 (FIPS 180-4), for the one place JOSE still names it: the `x5t` certificate thumbprint
/// (RFC 7515 §4.1.7) that older Microsoft Entra tenants expect in RS256 client assertions.
/// Never use it for anything that needs collision resistance.
public enum SHA1 {
    /// Digest length in bytes.
    public static let byteCount = 20

    /// The 20-byte SHA-1 digest of `data`.
    public static func hash(_ data: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: byteCount)
        var length: UInt32 = 0
        let result = data.withUnsafeBytes { bytes in
            EVP_Digest(bytes.baseAddress, bytes.count, &digest, &length, EVP_sha1(), nil)
        }
        // Fails only on allocation failure inside OpenSSL; there is no meaningful recovery.
        precondition(result == 1 && length == byteCount, "EVP_Digest(SHA1) failed")
        return digest
    }
}
