internal import COpenSSL

/// Cryptographically secure random bytes from OpenSSL's DRBG (`RAND_bytes`).
public enum SecureRandom {
    /// `count` random bytes.
    ///
    /// Traps if the generator cannot be seeded: continuing with weak randomness is worse.
    public static func bytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= Int(Int32.max), "SecureRandom.bytes: count out of range")
        var bytes = [UInt8](repeating: 0, count: count)
        guard count > 0 else { return bytes }
        let result = RAND_bytes(&bytes, Int32(count))
        precondition(result == 1, "RAND_bytes failed: the random generator is not seeded")
        return bytes
    }
}
