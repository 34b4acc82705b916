/// The ids that name one request or background run in logs, in the STS's `client-request-id` and in
/// problems (behaviour §12 `correlation_id`).
package enum CorrelationId {
    private static let correlationRandomness = RandomBytePool()
    /// Each byte's two lower-case hexadecimal digits as they lie in the text (first digit in the
    /// low byte, stored little-endian): one 16-bit store per byte, where two table reads and
    /// stores per byte, with four comparisons per byte for the dashes, were half of an id's cost (behaviour §10).
    private static let hexPairs: [UInt16] = (0..<256).map { byte in
        let digits = Array("0123456789abcdef".utf8)
        return UInt16(digits[byte >> 4]) | UInt16(digits[byte & 0x0F]) << 8
    }

    /// A random version-4 UUID in lower case (RFC 9562 §5.4), as `UUID().uuidString.lowercased()`
    /// gives, but from OpenSSL's DRBG drawn in batches: Foundation's `UUID()` opens, reads and
    /// closes `/dev/urandom` on every call, a tenth of the cached silent path's cost (behaviour §10).
    package static func make() -> String {
        var random = correlationRandomness.next16()
        let pairs = hexPairs.span  // read once, not through the lazy global on every byte
        return withUnsafeMutableBytes(of: &random) { bytes in
            bytes[6] = bytes[6] & 0x0F | 0x40
            bytes[8] = bytes[8] & 0x3F | 0x80
            // Written into the string's own storage: one allocation per id.
            return String(unsafeUninitializedCapacity: 36) { text in
                let out = UnsafeMutableRawBufferPointer(text)
                var written = 0
                for index in 0..<16 {
                    out.storeBytes(of: pairs[Int(bytes[index])].littleEndian, toByteOffset: written, as: UInt16.self)
                    written += 2
                    // 8-4-4-4-12 digits: a dash after bytes 3, 5, 7 and 9.
                    if (0b10_1010_1000 as UInt16) >> index & 1 == 1 {
                        out[written] = UInt8(ascii: "-")
                        written += 1
                    }
                }
                return written
            }
        }
    }
}
