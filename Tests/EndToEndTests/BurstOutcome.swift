import TokenRelayTesting

/// One request of ``ReplicaTests/burstThroughPgBouncer()``: its status (0 when it threw) and
/// what the failure report needs.
struct BurstOutcome: Sendable, CustomStringConvertible {
    let kind: String
    let status: Int
    /// The answer's `source` (silent requests), else nil.
    let source: String?
    /// The answer's body or the error, for the failure message (problem details: no secrets).
    let detail: String

    /// Runs `request`; a nil answer means a multi-step request (a sign-in) that succeeded.
    init(_ kind: String, _ request: () async throws -> TestResponse?) async {
        self.kind = kind
        do {
            let answer = try await request()
            status = answer?.status ?? 200
            source = answer?.json["source"] as? String
            detail = answer.map { $0.status == 200 ? "" : $0.text } ?? ""
        } catch {
            status = 0
            source = nil
            detail = "\(error)"
        }
    }

    var description: String { "\(kind) \(status) \(detail)" }
}
