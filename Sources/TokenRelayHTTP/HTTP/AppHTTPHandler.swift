import CryptoBridge
import Foundation
import HTTPCommon
import HTTPServerBridge
import IdentityCore
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayStore
import TokenRelayUpstream

/// The request pipeline (ADR 0013): every request is prepared once — correlation id, head
/// limits (414/431), deadline, route (404/405), body limit (413), API key from memory (401), rate budget (429), permission
/// (403), the route's query parameters and JSON body (415/400) and its own preparation (the silent route's scopes and
/// key limits) — and answered on the server thread when memory can; otherwise the prepared
/// request is handed to the suspended step, which continues from it (looking the key up in the
/// store when memory did not know it, then the handler). One rendering maps any error to a
/// problem+json answer (unknown errors become 500 and are logged, never shown); one epilogue
/// counts, times and logs every answer of both steps.
package final class AppHTTPHandler: HTTPHandler {
    package typealias Prepared = PreparedRequest

    private let router: Router
    private let authenticator: APIKeyAuthenticator
    private let services: AppServices
    private let logger: Logger
    /// `tokenrelay_http_requests_total` and the duration histogram of the answers memory gives
    /// most, resolved once (behaviour §10).
    private let silentOK: Metrics.Counter
    private let silentDuration: Metrics.HistogramSeries
    private let routeMetrics: RouteMetrics
    private let logsRequests: Bool
    /// Where request spans go (behaviour §8.11); nil when `TOKENRELAY_OTLP_ENDPOINT` is unset,
    /// and then the answers memory gives pay one nil check for tracing.
    private let tracer: Tracer?

    package init(router: Router, authenticator: APIKeyAuthenticator, services: AppServices, logger: Logger) {
        self.router = router
        self.authenticator = authenticator
        self.services = services
        self.logger = logger
        silentOK = services.metrics.counter("tokenrelay_http_requests_total", ["route": "/v1/tokens/silent", "status": "200"])
        silentDuration = services.metrics.histogram("tokenrelay_http_request_duration_seconds", ["route": "/v1/tokens/silent"])
        routeMetrics = RouteMetrics(metrics: services.metrics, routes: router.routes, unmatchedLabel: PreparedRequest.unmatchedRoute)
        logsRequests = logger.logsAccess
        tracer = services.tracer
    }

    /// The server-thread step: prepares the request and answers it when memory can.
    package func respondImmediately(to request: consuming HTTPRequest) -> HTTPFirstStep<PreparedRequest> {
        let correlationId = Self.correlationId(request.headers)
        var prepared = PreparedRequest(http: request, correlationId: correlationId)
        let response: HTTPResponse
        do {
            guard let answered = try prepare(&prepared) else { return .suspend(prepared) }
            response = answered
        } catch {
            response = render(error, prepared)
        }
        return .respond(finish(response, prepared, suspended: false))
    }

    /// The suspended step: continues from what the server-thread step prepared.
    /// The request's span is the task's current span meanwhile: its statements and upstream calls
    /// are its children, and the upstreams get their own span's id as their `traceparent`.
    package func respond(to prepared: PreparedRequest) async -> HTTPResponse {
        var prepared = prepared
        let span = RequestSpan.begin(prepared.http.headers, tracer: tracer)
        let response: HTTPResponse
        do {
            if let span {
                response = try await Tracing.$current.withValue(span.active) { try await run(&prepared) }
            } else {
                response = try await run(&prepared)
            }
        } catch {
            response = render(error, prepared)
        }
        return finish(response, prepared, suspended: true, span: span)
    }

    /// A request the server refused on its head (behaviour §7.4): problem+json naming the field
    /// (400 `invalid_request`, 501 `not_implemented`, 417 `expectation_failed`; 414 `uri_too_long`
    /// for too many query parameters), counted and logged
    /// like any answer.
    package func refused(_ refusal: HTTPHeadRefusal, request: HTTPRequest) -> HTTPResponse {
        let prepared = PreparedRequest(http: request, correlationId: Self.correlationId(request.headers))
        let code: ProblemCode =
            switch refusal.status {
            case 501: .notImplemented
            case 417: .expectationFailed
            case 414: .uriTooLong
            default: .invalidRequest
            }
        var problem = RelayError(code, refusal.reason, extensions: refusal.field.map { ["field": .string($0)] } ?? [:])
        problem.closesConnection = true
        return finish(render(problem, prepared), prepared, suspended: false)
    }

    /// The head of a request waiting for `100 Continue` (behaviour §7.4): the body is invited only
    /// once the head's limits, the route and the API key with its permission are accepted (the
    /// declared length is checked by the server before). The key is asked of the store, off the
    /// server thread, when memory does not know it; the rate budget is taken with the whole request.
    package func admitHead(_ request: HTTPRequest) -> HTTPHeadStep {
        let prepared = PreparedRequest(http: request, correlationId: Self.correlationId(request.headers))
        do {
            try RequestHeadLimits.check(request)
            switch router.match(method: request.method, path: request.path) {
            case .notFound, .methodNotAllowed:
                // The whole request gets the answer, from the same code (404/405 need no body).
                return .proceed
            case .found(let route, _):
                guard let permission = route.permissions else { return .proceed }
                switch try authenticator.authenticateFromMemory(request.headers) {
                case .caller(let caller):
                    guard caller.may(anyOf: permission) else { throw Self.lacking(permission) }
                    return .proceed
                case .refused(let problem):
                    throw problem
                case .unknown:
                    return .suspend { [self] in
                        do {
                            let caller = try await authenticator.authenticate(request.headers["Authorization"])
                            guard caller.may(anyOf: permission) else { throw Self.lacking(permission) }
                            return nil
                        } catch {
                            return finish(render(error, prepared), prepared, suspended: true)
                        }
                    }
                }
            }
        } catch {
            return .respond(finish(render(error, prepared), prepared, suspended: false))
        }
    }

    private static func lacking(_ permissions: [Permission]) -> RelayError {
        RelayError(.forbidden, "This API key lacks the permission " + permissions.map { "'\($0.rawValue)'" }.joined(separator: " or ") + ".")
    }

    /// Everything memory can do for the request, in the order the answers take precedence.
    /// - Returns: the answer, or nil to suspend (the key must be looked up, or the handler run).
    private func prepare(_ prepared: inout PreparedRequest) throws -> HTTPResponse? {
        // Read in place through the shared reference: a local copy retained every field.
        let received = prepared.received
        try RequestHeadLimits.check(received.http)
        let timeout = try Self.requestTimeout(received.http.headers, default: services.configuration.limits.requestTimeoutSeconds)
        switch router.match(method: received.http.method, path: received.http.path) {
        case .notFound:
            throw RelayError(.notFound, Self.noRouteDetail(method: received.http.method, path: received.http.path))
        case .methodNotAllowed(let allowed, let template):
            // Counted under the route the path is (it was `unmatched`, as an unknown path).
            prepared.routeLabel = template
            var error = RelayError(.methodNotAllowed, "\(received.http.method) is not allowed here; use \(allowed.joined(separator: ", ")).")
            error.allowedMethods = allowed
            throw error
        case .found(let route, let parameters):
            prepared.routeLabel = route.template
            prepared.route = route
            if received.http.bodyExceededLimit {
                throw RelayError(
                    .payloadTooLarge, "The request body exceeds \(services.configuration.limits.maxBodyBytes) bytes.", extensions: ["field": .string("body")])
            }
            // The key before the request's context: a 401 needs none (behaviour §10). Its verdict
            // is taken apart once (holding it and matching it twice copied it twice).
            var caller: Caller?
            if route.permissions != nil {
                switch try authenticator.authenticateFromMemory(received.http.headers) {
                case .caller(let known): caller = known
                case .refused(let problem): throw problem
                case .unknown: break
                }
            }
            var request = RouteRequest(
                received: prepared.received, parameters: parameters,
                context: RequestContext(
                    correlationId: prepared.correlationId, deadline: UpstreamClock.system.now().addingTimeInterval(timeout), caller: nil,
                    access: .unrestricted))
            if let permission = route.permissions {
                guard let caller else {
                    prepared.pendingPermission = permission
                    prepared.request = request
                    return nil
                }
                try Self.admit(caller, permission, &request.context)
            }
            let answered = try Self.prepareRoute(route, &request)
            prepared.request = request
            return answered
        }
    }

    /// The rest of the request after suspension: the key looked up in the store when memory did
    /// not know it (then the route's preparation, which could not run before), then the handler.
    private func run(_ prepared: inout PreparedRequest) async throws -> HTTPResponse {
        guard let route = prepared.route, var request = prepared.request else {
            throw RelayError(.internal, "The request was not prepared.")
        }
        if let permission = prepared.pendingPermission {
            let caller = try await authenticator.authenticate(request.http.headers["Authorization"])
            try Self.admit(caller, permission, &request.context)
            prepared.pendingPermission = nil
            if let answered = try Self.prepareRoute(route, &request) { return answered }
            prepared.request = request
        }
        return try await route.handler(request)
    }

    /// Takes the request from the caller's budget (429) and checks its permission (403): once
    /// per request, in whichever step the caller became known.
    private static func admit(_ caller: Caller, _ permission: [Permission], _ context: inout RequestContext) throws(RelayError) {
        try caller.takeRequest()
        guard caller.may(anyOf: permission) else { throw lacking(permission) }
        context.caller = caller.keyId
        context.readsAccounts = caller.may(.accountsRead)
        context.owner = caller.owner
        context.access = caller.access
    }

    /// The route's query parameters (400 naming one it does not take), its JSON body (400 naming
    /// `body` when it takes none) and its own preparation, run exactly once per request.
    private static func prepareRoute(_ route: Router.Route, _ request: inout RouteRequest) throws -> HTTPResponse? {
        try route.query.check(request.http.query)
        if route.body == .json { request.body = try JSONBody(request.http) } else { try route.body.check(request.http.body) }
        guard let prepare = route.prepare else { return nil }
        return try prepare(&request)
    }

    /// Appended to the detail of a problem whose sign-in link would not fit the request-target limit.
    static let noLinkDetail =
        " No sign_in_url: a link carrying these scopes and claims would exceed the \(RequestHeadLimits.maxTargetBytes)-byte request-target"
        + " limit; start the sign-in with POST /v1/sign-ins."

    /// The one rendering of every error (problems, store and acquisition errors; anything else 500).
    private func render(_ error: any Error, _ prepared: PreparedRequest) -> HTTPResponse {
        var problem = RelayError(rendering: error)
        // Routes name what their request chose; elsewhere (the sign-in callback, downstream
        // calls) the platform refused the scopes or authority the request led to.
        problem.nameInput()
        let named = problem.correlationId ?? prepared.correlationId
        if let hint = problem.signInHint, let links = services.signIns.links {
            let link = links.mint(hint, reader: prepared.request?.context.caller)
            // A link the service would itself refuse with 414 is not handed out (behaviour §4.4).
            if link.targetBytes <= RequestHeadLimits.maxTargetBytes {
                problem.extensions["sign_in_url"] = .string(link.url)
                problem.extensions["sign_in_id"] = .string(link.signInId)
            } else {
                problem.detail += Self.noLinkDetail
            }
        }
        if problem.code == .internal, !(error is RelayError), !(error is StoreError), !(error is AcquisitionError) {
            problem.detail = "An unexpected error occurred; see the service log for correlation id \(named)."
        }
        var response = problem.response(correlationId: named)
        if prepared.route?.page == true, BrowserPage.wanted(by: prepared.http.headers) {
            response = BrowserPage.problem(problem, correlationId: named, replacing: response)
        }
        if problem.code == .internal || problem.cause != nil {
            var fields = ["request.route": prepared.routeLabel, "error": problem.detail, "correlation.id": named, "response.status": String(problem.status)]
            fields["error.cause"] = problem.cause
            fields["trace.parent"] = Self.traceparent(prepared.http.headers)
            logger.error("request.failed", fields)
        }
        return response
    }

    /// The one epilogue of both steps: `client-request-id`, `tokenrelay_http_requests_total`,
    /// the duration histogram and the access line (`request.completed`, info).
    /// With tracing on, the request's span ends here too (`span`, or one begun now for an answer
    /// of the server-thread step).
    private func finish(_ response: HTTPResponse, _ prepared: PreparedRequest, suspended: Bool, span: RequestSpan? = nil) -> HTTPResponse {
        var response = response
        if !response.carriesClientRequestId { response.clientRequestId = prepared.correlationId }
        let seconds = RelayClock.monotonicNow() - prepared.started
        let route = prepared.routeLabel
        if response.status == 200 && route == "/v1/tokens/silent" {
            silentOK.increment()
            silentDuration.observe(seconds)
        } else {
            routeMetrics.record(matched: prepared.route, route: route, status: response.status, seconds: seconds)
        }
        if logsRequests {
            logger.access(
                Logger.AccessRecord(
                    method: prepared.http.method, route: route, status: response.status, seconds: seconds, keyId: prepared.request?.context.caller,
                    correlationId: prepared.correlationId, traceParent: Self.traceparent(prepared.http.headers),
                    step: suspended ? "suspended" : "server_thread"))
        }
        if let tracer {
            (span ?? RequestSpan.begin(prepared.http.headers, tracer: tracer))?.end(
                method: prepared.http.method, route: prepared.route?.template, status: response.status,
                elapsed: .nanoseconds(Int64(seconds * 1e9)), suspended: suspended)
        }
        return response
    }

    /// The request's W3C `traceparent` when it is well formed (`00-` 32 hex `-` 16 hex `-` 2 hex,
    /// W3C Trace Context §3.2), for the request's log lines; anything else is not logged.
    package static func traceparent(_ headers: HTTPHeaders) -> String? {
        guard let value = headers["traceparent"]?.lowercased(), value.utf8.count == 55 else { return nil }
        let parts = value.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 4, parts.map(\.count) == [2, 32, 16, 2], parts[0] != "ff",
            parts.allSatisfy({ $0.allSatisfy(\.isHexDigit) })
        else { return nil }
        return value
    }

    /// A 404's detail, `No route matches <method> <path>.` (the path ``QuotedText/shown(_:)``), its bytes put
    /// together once and made a `String` once: the interpolation appended and grew a string
    /// three times, a tenth of a 404's own cost (behaviour §10).
    static func noRouteDetail(method: String, path: String) -> String {
        let path = QuotedText.shown(path)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(noRoutePrefix.count + method.utf8.count + path.utf8.count + 2)
        bytes.append(contentsOf: noRoutePrefix)
        bytes.append(contentsOf: method.utf8)
        bytes.append(UInt8(ascii: " "))
        bytes.append(contentsOf: path.utf8)
        bytes.append(UInt8(ascii: "."))
        return String(decoding: bytes, as: UTF8.self)
    }

    private static let noRoutePrefix = Array("No route matches ".utf8)

    /// `client-request-id`, else `X-Correlation-ID`, else a new UUID (behaviour §8, §12). The body's
    /// `correlation_id` takes precedence where a route reads one.
    package static func correlationId(_ headers: HTTPHeaders) -> String {
        guard headers.mayCarryCorrelationId else { return newCorrelationId() }
        for name in HTTPHeaders.correlationIdNames {
            // The body's rule (printable ASCII, at most 128): a header value's control characters
            // were echoed in `client-request-id` and written to the log.
            if let value = headers[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty, JSONBody.isUsableCorrelationId(value) {
                return value
            }
        }
        return newCorrelationId()
    }

    /// A new correlation id (``CorrelationId/make()``).
    package static func newCorrelationId() -> String { CorrelationId.make() }

    /// The request budget in seconds: `Request-Timeout` (decimals allowed, at most 120) or the default.
    /// Read like the query integers (``TokenRelayUpstream/IntegerText``), with a decimal point
    /// allowed: decimal digits, leading zeros read past, and a value past the bound "at most 120"
    /// however many digits it has.
    package static func requestTimeout(_ headers: HTTPHeaders, default seconds: Double) throws -> Double {
        // Few requests carry it: a length check per field settles that without building a String.
        guard headers.containsName(ofLength: 15), let text = try headers.only("Request-Timeout") else { return seconds }
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        // Decimal digits and one point only: `Double` also reads hexadecimal (`0x10` is 16) and
        // exponents. Digits past a Double's range read as infinity, which the bound below refuses.
        guard trimmed.utf8.allSatisfy({ $0.isASCIIDigit || $0 == UInt8(ascii: ".") }),
            let value = Double(trimmed), value > 0
        else {
            throw RelayError.invalidRequest(field: "Request-Timeout", "'Request-Timeout' must be a positive number of seconds.")
        }
        guard value <= 120 else {
            throw RelayError.invalidRequest(field: "Request-Timeout", "'Request-Timeout' may be at most 120 seconds.")
        }
        return value
    }
}
