internal import COpenSSL

/// Comparison whose running time does not depend on where the inputs differ (`CRYPTO_memcmp`).
public enum ConstantTime {
    /// True when `a` and `b` have the same length and bytes. Lengths are not secret: unequal
    /// lengths return false at once.
    public static func equals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        guard !a.isEmpty else { return true }
        return a.withUnsafeBytes { x in b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, x.count) == 0 } }
    }
}
