import HTTPCommon
import TokenRelayBase
import TokenRelayStore

/// A request as far as the server-thread step prepared it (ADR 0013), handed to the suspended
/// step so that nothing is derived twice: the correlation id and start time, the matched route,
/// the route request (deadline, caller, JSON body, the route's own reading) and, when memory did
/// not know the API key, the permission still to check once the store has been asked.
package struct PreparedRequest: Sendable {
    package let received: ReceivedRequest
    /// Lent, not returned: a getter hands out a copy, a reference count for each of its fields.
    package var http: HTTPRequest { _read { yield received.http } }
    /// When the server-thread step began, ``RelayClock/monotonicNow()`` seconds (the duration
    /// histogram measures from here).
    package let started = RelayClock.monotonicNow()
    /// `client-request-id`, `X-Correlation-ID` or a new id; the body's `correlation_id`, where a
    /// route reads one, renames ``request``'s context instead.
    package let correlationId: String
    /// The route template, `unmatched` before (or without) a match: the metrics' `route` label.
    package var routeLabel = Self.unmatchedRoute
    /// The `route` label of requests no route matched.
    package static let unmatchedRoute = "unmatched"
    package var route: Router.Route?
    package var request: RouteRequest?
    /// Set when the key was not in memory: the suspended step authenticates against the store,
    /// takes the rate budget and checks these permissions (one of them), then runs the route's preparation.
    package var pendingPermission: [Permission]?

    package init(http: HTTPRequest, correlationId: String) {
        self.received = ReceivedRequest(http)
        self.correlationId = correlationId
    }
}

/// A request as the server received it, held by reference: the prepared request and the route's
/// request share it, where each held a copy of its every field (a reference count apiece, three
/// times per request; behaviour §10).
package final class ReceivedRequest: Sendable {
    package let http: HTTPRequest

    init(_ http: HTTPRequest) { self.http = http }
}
