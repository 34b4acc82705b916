import Foundation
import IdentityCore
import TokenRelayBase

/// Per-request facts every layer may need: the correlation id sent to the STS and echoed back,
/// the deadline (behaviour §5: `Request-Timeout` or `TOKENRELAY_REQUEST_TIMEOUT_S`), and the caller.
package struct RequestContext: Sendable {
    package let correlationId: String
    /// Absolute deadline.
    package let deadline: Date
    /// The API key id of the caller (the bootstrap key's too), or nil on open routes.
    package var caller: String?
    /// Whose external ids `account_id` values may name (behaviour §3.7): the caller's key name,
    /// `bootstrap` for the bootstrap key, nil on open routes and in background work.
    package var owner: String?
    /// Whether the caller's key has `accounts:read` (it may read any sign-in, behaviour §3.9).
    package var readsAccounts = false
    /// The caller's tenant and scope limits (behaviour §12 Permissions); unrestricted on open routes.
    package var access: KeyAccess
    /// The least time (seconds) one upstream attempt gets, even past `deadline`: a refresh-token
    /// redemption cut short after it was sent may have rotated the token at the STS, and the
    /// rotated token would be lost (behaviour §1 strict rotation). The caller still gets its answer
    /// at `deadline`; the attempt finishes in the background. 0: the deadline bounds every attempt.
    package var minimumAttemptSeconds: Double = 0
    /// No upstream attempt runs past this, whatever `minimumAttemptSeconds` says: a refresh-token
    /// redemption ends before its lease does, so no other replica can redeem the same token while
    /// this call could still succeed (ADR 0012). Nil: no such bound.
    package var attemptCutoff: Date?

    /// `access` has no default: a context copied without it would silently lift the caller's
    /// tenant and scope limits (use ``renamed(_:)`` to change only the correlation id).
    package init(correlationId: String, deadline: Date, caller: String?, access: KeyAccess) {
        self.correlationId = correlationId
        self.deadline = deadline
        self.caller = caller
        self.access = access
    }

    /// The same context named by another correlation id (the body's `correlation_id`); keeps
    /// the caller and its limits.
    package func renamed(_ correlationId: String) -> RequestContext {
        var copy = RequestContext(correlationId: correlationId, deadline: deadline, caller: caller, access: access)
        copy.owner = owner
        copy.readsAccounts = readsAccounts
        copy.minimumAttemptSeconds = minimumAttemptSeconds
        copy.attemptCutoff = attemptCutoff
        return copy
    }

    /// Work no caller waits for (a proactive refresh, a keep-alive): a new correlation id, no
    /// caller, `seconds` to finish by `clock`, the waiting clock (``UpstreamClock``).
    package static func background(seconds: Double, clock: UpstreamClock = .system) -> RequestContext {
        RequestContext(correlationId: CorrelationId.make(), deadline: clock.now().addingTimeInterval(seconds), caller: nil, access: .unrestricted)
    }

    /// Seconds left before the deadline (negative once it passed).
    package var remainingSeconds: Double { deadline.timeIntervalSince(UpstreamClock.system.now()) }

    /// Whether `correlationId` may be sent to the STS as `client-request-id` (only a GUID may, behaviour §12).
    package var correlationIdIsGUID: Bool { Self.isGUID(correlationId) }

    /// Whether `UUID(uuidString:)` reads `text`. A GUID as it is usually written (36 characters,
    /// hyphens at 8, 13, 18 and 23, hexadecimal digits elsewhere) is recognised on its bytes:
    /// Foundation's parsing was 9k instructions of every forced refresh (behaviour §10).
    /// Anything else is still Foundation's to read: on Linux it also takes spellings such as a
    /// blank or a sign before a group.
    package static func isGUID(_ text: String) -> Bool {
        TenantName.isGUIDShaped(text) || UUID(uuidString: text) != nil
    }
}
