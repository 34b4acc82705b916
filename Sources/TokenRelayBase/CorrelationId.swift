/// The ids that name one request or background run in logs, in the STS's `client-request-id` and in
/// problems (behaviour §12 `correlation_id`).
package enum CorrelationId {
    private static let correlationRandomness = RandomBytePool()
    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// A random version-4 UUID in lower case (RFC 9562 §5.4), as `UUID().uuidString.lowercased()`
    /// gives, but from OpenSSL's DRBG drawn in batches: Foundation's `UUID()` opens, reads and
    /// closes `/dev/urandom` on every call, a tenth of the cached silent path's cost (behaviour §10).
    package static func make() -> String {
        var random = correlationRandomness.next16()
        let hexDigits = hexDigits.span  // read once, not through the lazy global on every digit
        return withUnsafeMutableBytes(of: &random) { bytes in
            bytes[6] = bytes[6] & 0x0F | 0x40
            bytes[8] = bytes[8] & 0x3F | 0x80
            // Written into the string's own storage: one allocation per id.
            return String(unsafeUninitializedCapacity: 36) { text in
                var written = 0
                for index in 0..<16 {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        text[written] = UInt8(ascii: "-")
                        written += 1
                    }
                    text[written] = hexDigits[Int(bytes[index] >> 4)]
                    text[written + 1] = hexDigits[Int(bytes[index] & 0x0F)]
                    written += 2
                }
                return written
            }
        }
    }
}
