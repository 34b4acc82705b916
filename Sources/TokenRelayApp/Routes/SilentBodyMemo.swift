import Synchronization

/// The server-thread reading of a silent-token body remembered for the few bodies callers
/// actually repeat (a backend asks for the same account and scopes again and again).
///
/// Reading a body with `JSONSerialization` and normalising its scopes is a pure function of
/// its bytes, and was about a quarter of the instructions of a cached silent request
/// (`BENCH_CALLGRIND=… bench/run`, SPEC §10). Only bodies without a `correlation_id` are kept
/// (a correlation id is usually new on every request), and only accepted ones: any other body
/// is read afresh, so errors and the async path are unchanged.
final class SilentBodyMemo: Sendable {
    static let shared = SilentBodyMemo()

    /// Distinct bodies remembered before the memo starts over (a bound on memory, not a tuning knob).
    static let capacity = 256
    /// Longest body remembered, in bytes; the usual body is under 100.
    static let longestBody = 512

    private let memo = Mutex<[String: SilentTokenRequest]>([:])

    /// The request read from `body`, remembered or computed by `read`.
    /// - Parameters:
    ///   - body: the request body (already known to be `application/json`).
    ///   - read: the reading to remember: nil for a body left to the async path; a correlation id
    ///     marks a body not worth remembering.
    func request(
        body: [UInt8], read: ([UInt8]) -> (SilentTokenRequest, correlationId: String?)?
    ) -> (SilentTokenRequest, correlationId: String?)? {
        guard body.count <= Self.longestBody else { return read(body) }
        let key = String(decoding: body, as: UTF8.self)
        if let known = memo.withLock({ $0[key] }) { return (known, nil) }
        guard let result = read(body) else { return nil }
        if result.correlationId == nil {
            memo.withLock { memo in
                if memo.count >= Self.capacity { memo.removeAll(keepingCapacity: true) }
                memo[key] = result.0
            }
        }
        return result
    }
}
