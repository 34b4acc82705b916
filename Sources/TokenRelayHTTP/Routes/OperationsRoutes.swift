import HTTPCommon
import IdentityCore
import TokenRelayBase

/// `/healthz`, `/readyz`, `/metrics` (behaviour §8); no API key.
package enum OperationsRoutes {
    package static func register(on router: inout Router, _ services: AppServices) {
        // Answered by its preparation, on the server thread (the handler is never reached).
        router.add("GET", "/healthz", access: .open, prepare: { _ in services.health.liveness() }) { _ in
            services.health.liveness()
        }
        // Reads only; the result sets `tokenrelay_ready` (so does the periodic self-check).
        router.add("GET", "/readyz", access: .open) { _ in await services.health.readiness() }
        router.add("GET", "/metrics", access: .open) { _ in
            HTTPResponse(status: 200, headers: ["Content-Type": "text/plain; version=0.0.4"], body: Array(services.metrics.render().utf8))
        }
    }
}
