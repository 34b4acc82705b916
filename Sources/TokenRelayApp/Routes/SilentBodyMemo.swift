import Synchronization

/// The reading of a silent-token body remembered for the few bodies callers actually repeat (a
/// backend asks for the same account and scopes again and again).
///
/// Reading a body (``JSONBody``, then ``TokenRoutes/parseSilent(_:authorities:)`` with its scope
/// canonicalisation) is a pure function of its bytes, and was about a quarter of the
/// instructions of a cached silent request (`BENCH_CALLGRIND=… bench/run`, SPEC §10). Only
/// accepted bodies without a `correlation_id` are kept (a correlation id is usually new on
/// every request): a refused body is read afresh each time, so its problem is exact.
final class SilentBodyMemo: Sendable {
    static let shared = SilentBodyMemo()

    /// Distinct bodies remembered before the memo starts over (a bound on memory, not a tuning knob).
    static let capacity = 256
    /// Longest body remembered, in bytes; the usual body is under 100.
    static let longestBody = 512

    private let memo = Mutex<[String: SilentTokenRequest]>([:])

    /// The request read from `body`, remembered or computed by `read`.
    /// - Parameters:
    ///   - body: the request body (its content type already checked).
    ///   - read: the one reading of a body: the request and the body's `correlation_id` (a
    ///     correlation id marks a body not worth remembering), or the problem.
    /// - Throws: what `read` throws.
    func request(
        body: [UInt8], read: ([UInt8]) throws(Problem) -> (SilentTokenRequest, correlationId: String?)
    ) throws(Problem) -> (SilentTokenRequest, correlationId: String?) {
        // Keyed by valid UTF-8 only: decoding with replacement would give two bodies one key.
        guard body.count <= Self.longestBody, let key = String(validating: body, as: UTF8.self) else { return try read(body) }
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
