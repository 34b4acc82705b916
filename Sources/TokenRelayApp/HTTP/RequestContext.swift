import Foundation

/// Per-request facts every layer may need: the correlation id sent to the STS and echoed back,
/// the deadline (SPEC §5: `Request-Timeout` or `TOKENRELAY_REQUEST_TIMEOUT_S`), and the caller.
struct RequestContext: Sendable {
    let correlationId: String
    /// Absolute deadline.
    let deadline: Date
    /// The API key id of the caller, `bootstrap`, or nil on open routes.
    var caller: String?

    /// Seconds left before the deadline (negative once it passed).
    var remainingSeconds: Double { deadline.timeIntervalSinceNow }

    /// Whether `correlationId` may be sent to the STS as `client-request-id` (only a GUID may, SPEC §12).
    var correlationIdIsGUID: Bool { UUID(uuidString: correlationId) != nil }
}
