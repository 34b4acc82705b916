internal import COpenSSL

/// Comparison whose running time does not depend on where the inputs differ (`CRYPTO_memcmp`).
public enum ConstantTime {
    /// True when `a` and `b` have the same length and bytes. Lengths are not secret: unequal
    /// lengths return false at once.
    public static func equals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBytes { equals($0, b) }
    }

    /// ``equals(_:_:)`` of bytes borrowed where they lie (a header's value) against `b`.
    public static func equals(_ a: Span<UInt8>, _ b: [UInt8]) -> Bool {
        a.withUnsafeBytes { equals($0, b) }
    }

    /// ``equals(_:_:)`` of `a`'s UTF-8 bytes, read in place (a native string's are contiguous:
    /// no copy), against `b`.
    public static func equals(utf8 a: Substring, _ b: [UInt8]) -> Bool {
        var a = a
        return a.withUTF8 { equals(UnsafeRawBufferPointer($0), b) }
    }

    private static func equals(_ x: UnsafeRawBufferPointer, _ b: [UInt8]) -> Bool {
        guard x.count == b.count else { return false }
        guard !x.isEmpty else { return true }
        return b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, x.count) == 0 }
    }
}
