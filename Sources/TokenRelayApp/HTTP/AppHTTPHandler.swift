import CryptoBridge
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
    /// `tokenrelay_http_requests_total` for the 200 answers given on the server thread.
    private let silentOK: Metrics.Counter
    private let healthzOK: Metrics.Counter

    init(router: Router, authenticator: APIKeyAuthenticator, services: AppServices, logger: Logger) {
        self.router = router
        self.authenticator = authenticator
        self.services = services
        self.logger = logger
        silentOK = services.metrics.counter("tokenrelay_http_requests_total", ["route": "/v1/tokens/silent", "status": "200"])
        healthzOK = services.metrics.counter("tokenrelay_http_requests_total", ["route": "/healthz", "status": "200"])
    }

    /// Answers on the server thread what memory alone can answer: liveness, and a silent token
    /// request whose caller, account and token are all in this replica's memory (SPEC §10).
    func respondImmediately(to request: HTTPRequest) -> HTTPResponse? {
        let route: String
        let response: HTTPResponse?
        let counted: Metrics.Counter
        switch (request.method, request.path) {
        case ("GET", "/healthz"):
            route = "/healthz"
            counted = healthzOK
            var liveness = services.health.liveness()
            liveness.headers.set("client-request-id", Self.correlationId(request.headers))
            response = liveness
        case ("POST", "/v1/tokens/silent"):
            route = "/v1/tokens/silent"
            counted = silentOK
            response = TokenRoutes.immediate(request, services: services, caller: authenticator.authenticateFromMemory(request.headers["Authorization"]))
        default:
            return nil
        }
        if let response {
            if response.status == 200 {
                counted.increment()
            } else {
                services.metrics.increment("tokenrelay_http_requests_total", ["route": route, "status": String(response.status)])
            }
        }
        return response
    }

    func respond(to request: HTTPRequest) async -> HTTPResponse {
        let started = ContinuousClock.now
        let correlationId = Self.correlationId(request.headers)
        var routeLabel = "unmatched"
        var response: HTTPResponse
        do {
            let timeout = try Self.requestTimeout(request.headers, default: services.configuration.limits.requestTimeoutSeconds)
            var context = RequestContext(correlationId: correlationId, deadline: Date().addingTimeInterval(timeout), caller: nil, access: .unrestricted)
            switch router.match(method: request.method, path: request.path) {
            case .notFound:
                throw Problem(.notFound, "No route matches \(request.method) \(request.path).")
            case .methodNotAllowed(let allowed):
                throw Problem(
                    .methodNotAllowed, "\(request.method) is not allowed here; use \(allowed.joined(separator: ", ")).",
                    headers: ["Allow": allowed.joined(separator: ", ")])
            case .found(let route, let parameters):
                routeLabel = route.template
                if request.bodyExceededLimit {
                    throw Problem(
                        .payloadTooLarge, "The request body exceeds \(services.configuration.limits.maxBodyBytes) bytes.",
                        extensions: ["field": .string("body")])
                }
                if case .requires(let permission) = route.access {
                    let caller = try await authenticator.authenticate(request.headers["Authorization"])
                    try caller.takeRequest()
                    guard caller.may(permission) else {
                        throw Problem(.forbidden, "This API key lacks the permission '\(permission.rawValue)'.")
                    }
                    context.caller = caller.keyId
                    context.access = caller.access
                }
                response = try await route.handler(RouteRequest(http: request, parameters: parameters, context: context))
            }
        } catch {
            // One rendering of every error (problems, store and acquisition errors; anything else 500).
            var problem = Problem(rendering: error)
            let named = problem.correlationId ?? correlationId
            if let hint = problem.signInHint, let links = services.signIns.links {
                problem.extensions["sign_in_url"] = .string(links.mint(hint))
            }
            if problem.code == .internal, !(error is Problem), !(error is StoreError), !(error is AcquisitionError) {
                problem.detail = "An unexpected error occurred; see the service log for correlation id \(named)."
            }
            response = problem.response(correlationId: named)
            response.headers.set("client-request-id", named)
            if problem.code == .internal || problem.cause != nil {
                var fields = ["request.route": routeLabel, "error": problem.detail, "correlation.id": named, "response.status": String(problem.status)]
                fields["error.cause"] = problem.cause
                logger.error("request.failed", fields)
            }
        }
        if response.headers["client-request-id"] == nil {
            response.headers.set("client-request-id", correlationId)
        }
        let elapsed = started.duration(to: .now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        services.metrics.increment("tokenrelay_http_requests_total", ["route": routeLabel, "status": String(response.status)])
        services.metrics.observe("tokenrelay_http_request_duration_seconds", ["route": routeLabel], seconds: seconds)
        logger.debug(
            "request.completed",
            [
                "request.method": request.method, "request.route": routeLabel, "response.status": String(response.status),
                "correlation.id": correlationId, "duration_ms": String(format: "%.2f", seconds * 1000),
            ])
        return response
    }

    /// `client-request-id`, else `X-Correlation-ID`, else a new UUID (SPEC §8, §12). The body's
    /// `correlation_id` takes precedence where a route reads one.
    static func correlationId(_ headers: HTTPHeaders) -> String {
        // Most requests carry neither header: a length check per field settles that cheaply.
        guard headers.contains(where: { $0.name.utf8.count == 17 || $0.name.utf8.count == 16 }) else { return newCorrelationId() }
        for name in ["client-request-id", "X-Correlation-ID"] {
            if let value = headers[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty, value.count <= 128,
                value.allSatisfy({ $0.isASCII && !$0.isNewline })
            {
                return value
            }
        }
        return newCorrelationId()
    }

    private static let correlationRandomness = RandomBytePool()
    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// A random version-4 UUID in lower case (RFC 9562 §5.4), as `UUID().uuidString.lowercased()`
    /// gives, but from OpenSSL's DRBG drawn in batches: Foundation's `UUID()` opens, reads and
    /// closes `/dev/urandom` on every call, a tenth of the cached silent path's cost (SPEC §10).
    static func newCorrelationId() -> String {
        var bytes = correlationRandomness.next16()
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        let hex = Self.hexDigits
        var text: [UInt8] = []
        text.reserveCapacity(36)
        for (index, byte) in bytes.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { text.append(UInt8(ascii: "-")) }
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
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
