import Synchronization
import TokenRelayAcquisition
import TokenRelayBase

/// The reading of a silent-token body remembered for the few bodies callers actually repeat (a
/// backend asks for the same account and scopes again and again).
///
/// Reading a body (``JSONBody``, then ``TokenRoutes/parseSilent(_:authorities:)`` with its scope
/// canonicalisation) is a pure function of its bytes, and was about a quarter of the
/// instructions of a cached silent request (`BENCH_CALLGRIND=… bench/run`, behaviour §10). Only
/// accepted bodies without a `correlation_id` are kept (a correlation id is usually new on
/// every request): a refused body is read afresh each time, so its problem is exact.
package final class SilentBodyMemo: Sendable {
    package init() {}

    package static let shared = SilentBodyMemo()

    /// Distinct bodies remembered before the memo starts over (a bound on memory, not a tuning knob).
    package static let capacity = 256
    /// Longest body remembered, in bytes; the usual body is under 100.
    package static let longestBody = 512

    /// A body's exact bytes, hashed in one pass (`[UInt8]`'s own hashing feeds the hasher a byte
    /// at a time; a `String` key had to be made and validated per request first).
    private struct BodyKey: Hashable {
        let bytes: [UInt8]
        func hash(into hasher: inout Hasher) {
            bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        }

        /// Every byte folded without a branch, so the compiler compares blocks at a time (`[UInt8]`'s
        /// own `==` went byte by byte with an exit per byte: about 400 instructions of a hit).
        static func == (a: BodyKey, b: BodyKey) -> Bool {
            let x = a.bytes.span, y = b.bytes.span
            guard x.count == y.count else { return false }
            var differ: UInt8 = 0
            for index in 0..<x.count { differ |= x[index] ^ y[index] }
            return differ == 0
        }
    }

    private let memo = Mutex<[BodyKey: SilentTokenRequest]>([:])

    /// The request read from `body`, remembered or computed by `read`.
    /// - Parameters:
    ///   - body: the request body (its content type already checked).
    ///   - read: the one reading of a body: the request and the body's `correlation_id` (a
    ///     correlation id marks a body not worth remembering), or the problem.
    /// - Throws: what `read` throws.
    package func request(
        body: [UInt8], read: ([UInt8]) throws(RelayError) -> (SilentTokenRequest, correlationId: String?)
    ) throws(RelayError) -> (SilentTokenRequest, correlationId: String?) {
        guard body.count <= Self.longestBody else { return try read(body) }
        let key = BodyKey(bytes: body)
        if let known = memo.withLock({ $0[key] }) { return (known, nil) }
        let result = try read(body)
        if result.correlationId == nil {
            memo.withLock { memo in
                if memo.count >= Self.capacity { memo.removeAll(keepingCapacity: true) }
                memo[key] = result.0
            }
        }
        return result
    }
}
