import TokenRelayBase

/// The request counter and duration histogram handles of every route, resolved when the handler
/// is built, so the epilogue of any answer (a cache hit, a 401, a 404) bumps atomics instead of
/// rendering labels and taking the metrics lock (behaviour §8, §10). Immutable after `init`:
/// read from every server thread without a lock.
package struct RouteMetrics: Sendable {
    private struct Series: Sendable {
        let duration: Metrics.HistogramSeries
        /// The counter of each of ``statuses``, in that order (found through ``statusSlots``).
        let byStatus: [Metrics.Counter]
    }

    /// The statuses the service answers with (openapi.yaml); any other goes through the slow path.
    package static let statuses = [200, 201, 202, 204, 302, 400, 401, 403, 404, 405, 409, 410, 413, 414, 415, 422, 429, 431, 500, 502, 503, 504]

    /// Each status's place in ``statuses`` (-1 for one not there), indexed by the status: two
    /// array reads where a dictionary hashed the status on every answer (behaviour §10).
    private static let statusSlots: [Int8] = {
        var slots = [Int8](repeating: -1, count: 600)
        for (slot, status) in statuses.enumerated() { slots[status] = Int8(slot) }
        return slots
    }()

    private let metrics: Metrics
    private let routes: [String: Series]
    /// The series of each of the router's routes, by ``Router/Route/index``, and of requests no
    /// route matched: found without hashing a label (behaviour §10).
    private let byRoute: [Series]
    private let unmatched: Series

    /// - Parameters:
    ///   - routes: the router's routes (``Router/routes``), in order.
    ///   - unmatchedLabel: the label of requests no route matched.
    package init(metrics: Metrics, routes matchable: [Router.Route], unmatchedLabel: String) {
        self.metrics = metrics
        var routes: [String: Series] = [:]
        for route in matchable.map(\.template) + [unmatchedLabel] where routes[route] == nil {
            let byStatus = Self.statuses.map { status in
                metrics.counter("tokenrelay_http_requests_total", ["route": route, "status": String(status)])
            }
            routes[route] = Series(duration: metrics.histogram("tokenrelay_http_request_duration_seconds", ["route": route]), byStatus: byStatus)
        }
        self.routes = routes
        byRoute = matchable.map { routes[$0.template]! }
        unmatched = routes[unmatchedLabel]!
    }

    /// Counts one answer of `status` on `route` and observes its duration in seconds.
    /// - Parameters:
    ///   - matched: the route the request matched (nil: none, or only its path, a 405).
    ///   - route: the `route` label (``PreparedRequest/routeLabel``).
    package func record(matched: Router.Route?, route: String, status: Int, seconds: Double) {
        let known: Series?
        if let matched {
            known = matched.index < byRoute.count ? byRoute[matched.index] : routes[route]
        } else {
            known = route == PreparedRequest.unmatchedRoute ? unmatched : routes[route]
        }
        guard let series = known else {
            metrics.increment("tokenrelay_http_requests_total", ["route": route, "status": String(status)])
            metrics.observe("tokenrelay_http_request_duration_seconds", ["route": route], seconds: seconds)
            return
        }
        let slots = Self.statusSlots
        if slots.indices.contains(status), slots[status] >= 0 {
            series.byStatus[Int(slots[status])].increment()
        } else {
            metrics.increment("tokenrelay_http_requests_total", ["route": route, "status": String(status)])
        }
        series.duration.observe(seconds)
    }
}
