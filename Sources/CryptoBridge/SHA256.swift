internal import COpenSSL

/// SHA-256 (FIPS 180-4).
public enum SHA256 {
    /// Digest length in bytes.
    public static let byteCount = 32

    /// The 32-byte SHA-256 digest of `data`.
    public static func hash(_ data: [UInt8]) -> [UInt8] {
        data.withUnsafeBytes { hash($0) }
    }

    /// The 32-byte SHA-256 digest of `text`'s UTF-8 bytes, read in place (no copy into an array:
    /// an API key is hashed on every request).
    public static func hash(utf8 text: String) -> [UInt8] {
        var text = text
        return text.withUTF8 { hash(UnsafeRawBufferPointer($0)) }
    }

    private static func hash(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: byteCount)
        var length: UInt32 = 0
        let result = EVP_Digest(bytes.baseAddress, bytes.count, &digest, &length, Algorithms.shared.sha256, nil)
        // Fails only on allocation failure inside OpenSSL; there is no meaningful recovery.
        precondition(result == 1 && length == byteCount, "EVP_Digest(SHA256) failed")
        return digest
    }
}
