internal import COpenSSL

/// HMAC with SHA-256 (RFC 2104, test vectors in RFC 4231).
public enum HMACSHA256 {
    /// The 32-byte HMAC-SHA256 of `data` under `key` (any length, including empty).
    public static func authenticationCode(for data: [UInt8], key: [UInt8]) -> [UInt8] {
        var code = [UInt8](repeating: 0, count: SHA256.byteCount)
        var length: UInt32 = 0
        // A non-null key pointer even for an empty key: OpenSSL treats NULL as "reuse the old key".
        let keyStorage = key.isEmpty ? [0] : key
        let result = keyStorage.withUnsafeBytes { keyBytes in
            data.withUnsafeBytes { dataBytes in
                HMAC(
                    Algorithms.shared.sha256, keyBytes.baseAddress, Int32(key.count),
                    dataBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), dataBytes.count, &code, &length)
            }
        }
        precondition(result != nil && length == SHA256.byteCount, "HMAC(SHA256) failed")
        return code
    }
}
