import Foundation
import HTTPCommon
import HTTPServerBridge
import IdentityCore

/// Turns HTTP requests into route calls: correlation id, deadline, routing (404/405), body
/// limit (413), API-key authentication (401/403), and one place that maps any error to a
/// problem+json answer (unknown errors become 500 and are logged, never shown).
final class AppHTTPHandler: HTTPHandler {
    private let router: Router
    private let authenticator: APIKeyAuthenticator
    private let services: AppServices
    private let logger: Logger

    init(router: Router, authenticator: APIKeyAuthenticator, services: AppServices, logger: Logger) {
        self.router = router
        self.authenticator = authenticator
        self.services = services
        self.logger = logger
    }

    /// Answers on the server thread what memory alone can answer: liveness, and a silent token
    /// request whose caller, account and token are all in this replica's memory (SPEC §10).
    func respondImmediately(to request: HTTPRequest) -> HTTPResponse? {
        let route: String
        let response: HTTPResponse?
        switch (request.method, request.path) {
        case ("GET", "/healthz"):
            route = "/healthz"
            response = services.health.liveness()
        case ("POST", "/v1/tokens/silent"):
            route = "/v1/tokens/silent"
            response = TokenRoutes.immediate(request, services: services, caller: authenticator.authenticateFromMemory(request.headers["Authorization"]))
        default:
            return nil
        }
        if let response {
            services.metrics.increment("tokenrelay_http_requests_total", ["route": route, "status": String(response.status)])
        }
        return response
    }

    func respond(to request: HTTPRequest) async -> HTTPResponse {
        let started = ContinuousClock.now
        let correlationId = Self.correlationId(request.headers)
        var routeLabel = "unmatched"
        var response: HTTPResponse
        do {
            let timeout = try Self.requestTimeout(request.headers, default: services.configuration.requestTimeoutSeconds)
            var context = RequestContext(correlationId: correlationId, deadline: Date().addingTimeInterval(timeout), caller: nil)
            switch router.match(method: request.method, path: request.path) {
            case .notFound:
                throw Problem(.notFound, "No route matches \(request.method) \(request.path).")
            case .methodNotAllowed(let allowed):
                throw Problem(.methodNotAllowed, "\(request.method) is not allowed here; use \(allowed.joined(separator: ", ")).",
                    headers: ["Allow": allowed.joined(separator: ", ")])
            case .found(let route, let parameters):
                routeLabel = route.template
                if request.bodyExceededLimit {
                    throw Problem(.payloadTooLarge, "The request body exceeds \(services.configuration.maxBodyBytes) bytes.", extensions: ["field": .string("body")])
                }
                if case .requires(let permission) = route.access {
                    let caller = try await authenticator.authenticate(request.headers["Authorization"])
                    guard caller.may(permission) else {
                        throw Problem(.forbidden, "This API key lacks the permission '\(permission.rawValue)'.")
                    }
                    context.caller = caller.keyId
                }
                response = try await route.handler(RouteRequest(http: request, parameters: parameters, context: context))
            }
        } catch let problem as Problem {
            response = problem.response(correlationId: correlationId)
            if problem.code == .internal {
                logger.error("request.failed", ["request.route": routeLabel, "error": problem.detail, "correlation.id": correlationId])
            }
        } catch {
            logger.error("request.failed", ["request.route": routeLabel, "error": String(describing: type(of: error)), "correlation.id": correlationId])
            response = Problem(.internal, "An unexpected error occurred; see the service log for correlation id \(correlationId).").response(correlationId: correlationId)
        }
        if response.headers["client-request-id"] == nil {
            response.headers.set("client-request-id", correlationId)
        }
        let elapsed = started.duration(to: .now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        services.metrics.increment("tokenrelay_http_requests_total", ["route": routeLabel, "status": String(response.status)])
        services.metrics.observe("tokenrelay_http_request_duration_seconds", ["route": routeLabel], seconds: seconds)
        logger.debug("request.completed", [
            "request.method": request.method, "request.route": routeLabel, "response.status": String(response.status),
            "correlation.id": correlationId, "duration_ms": String(format: "%.2f", seconds * 1000),
        ])
        return response
    }

    /// `client-request-id`, else `X-Correlation-ID`, else a new UUID (SPEC §8, §12). The body's
    /// `correlation_id` takes precedence where a route reads one.
    static func correlationId(_ headers: HTTPHeaders) -> String {
        for name in ["client-request-id", "X-Correlation-ID"] {
            if let value = headers[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty, value.count <= 128,
                value.allSatisfy({ $0.isASCII && !$0.isNewline })
            {
                return value
            }
        }
        return UUID().uuidString.lowercased()
    }

    /// The request budget in seconds: `Request-Timeout` (decimals allowed, at most 120) or the default.
    static func requestTimeout(_ headers: HTTPHeaders, default seconds: Double) throws -> Double {
        guard let text = headers["Request-Timeout"] else { return seconds }
        guard let value = Double(text.trimmingCharacters(in: .whitespaces)), value > 0, value.isFinite else {
            throw Problem.invalidRequest(field: "Request-Timeout", "'Request-Timeout' must be a positive number of seconds.")
        }
        guard value <= 120 else {
            throw Problem.invalidRequest(field: "Request-Timeout", "'Request-Timeout' may be at most 120 seconds.")
        }
        return value
    }
}
