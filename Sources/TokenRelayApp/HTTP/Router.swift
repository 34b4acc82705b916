import HTTPCommon

/// Matches a method and path against route templates such as `/v1/accounts/{account_id}` and
/// `/v1/downstream/{api}/{path...}` (the last form takes the rest of the path, several segments).
///
/// Unknown paths are 404 `not_found`; a known path with another method is 405 with `Allow`
/// (behaviour §12 Problems).
struct Router: Sendable {
    enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
        case remainder(String)
    }

    struct Route: Sendable {
        let method: String
        let template: String
        let segments: [Segment]
        let access: RouteAccess
        /// Whether the request pipeline reads a JSON body for the handler (``RouteRequest/body``).
        let body: RouteBody
        /// Route-specific preparation run once the caller is known (see ``RoutePreparation``).
        let prepare: RoutePreparation?
        let handler: RouteHandler
        /// Literal segments of the template: the more, the more specific.
        let literalCount: Int
    }

    enum Match {
        case found(Route, [String: String])
        case methodNotAllowed(allowed: [String])
        case notFound
    }

    private(set) var routes: [Route] = []
    /// Path → method → route for templates without parameters that no earlier route with the
    /// same method also matches: ``match(method:path:)`` finds them with one dictionary lookup
    /// instead of splitting the path and binding every template (a tenth of a cached silent
    /// request, behaviour §10). Every other request takes the general walk, with the same result.
    private var exact: [String: [String: Route]] = [:]

    /// Registers `handler` for `method` on `template`.
    /// - Parameters:
    ///   - body: `.json` to have the pipeline read the body once (415/400 before the handler runs).
    ///   - prepare: memory-only work run before the handler, on the server thread when the
    ///     caller is known there; it may answer by itself.
    mutating func add(
        _ method: String, _ template: String, access: RouteAccess, body: RouteBody = .none, prepare: RoutePreparation? = nil,
        _ handler: @escaping RouteHandler
    ) {
        let segments = Self.parse(template)
        let route = Route(
            method: method, template: template, segments: segments, access: access, body: body, prepare: prepare, handler: handler,
            literalCount: segments.count { if case .literal = $0 { true } else { false } })
        // A template of literals only is the most specific match of its path: looked up directly.
        if route.literalCount == route.segments.count {
            exact["/" + Self.split(template).joined(separator: "/"), default: [:]][method] = route
        }
        routes.append(route)
    }

    /// The same handler for several methods (e.g. every method a relay passes through).
    mutating func add(_ methods: [String], _ template: String, access: RouteAccess, _ handler: @escaping RouteHandler) {
        for method in methods { add(method, template, access: access, handler) }
    }

    func match(method: String, path: String) -> Match {
        if let route = exact[path]?[method] { return .found(route, [:]) }
        let parts = Self.split(path)
        // Only the templates with the most literal segments that fit the path decide, as in
        // OpenAPI path matching: `/v1/accounts/import` is that route (405 for GET), never the
        // account `import` of `/v1/accounts/{account_id}`.
        var mostLiterals = -1
        var found: (Route, [String: String])?
        var allowed: [String] = []
        for route in routes {
            guard route.literalCount >= mostLiterals, let parameters = Self.bind(route.segments, to: parts) else { continue }
            if route.literalCount > mostLiterals {
                mostLiterals = route.literalCount
                found = nil
                allowed = []
            }
            if found == nil, route.method == method || (method == "HEAD" && route.method == "GET") {
                found = (route, parameters)
            }
            allowed.append(route.method)
        }
        if let (route, parameters) = found { return .found(route, parameters) }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed: allowed)
    }

    /// The templates in OpenAPI form (`{path}` for a remainder), for the route-parity test.
    var openAPIOperations: [(method: String, path: String)] {
        routes.map { route in
            (route.method, route.template.replacingOccurrences(of: "...}", with: "}"))
        }
    }

    private static func parse(_ template: String) -> [Segment] {
        split(template).map { part in
            if part.hasPrefix("{") && part.hasSuffix("...}") {
                return .remainder(String(part.dropFirst().dropLast(4)))
            }
            if part.hasPrefix("{") && part.hasSuffix("}") {
                return .parameter(String(part.dropFirst().dropLast()))
            }
            return .literal(part)
        }
    }

    /// Splits on the byte `/`, not on Characters: a combining mark or an emoji skin-tone modifier
    /// right after `/` joins it into one grapheme cluster, which hid the separator (found by
    /// schemathesis: `DELETE /v1/accounts/🏻` answered 404 "no route").
    private static func split(_ path: String) -> [String] {
        path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map { String(decoding: $0, as: UTF8.self) }
    }

    private static func bind(_ segments: [Segment], to parts: [String]) -> [String: String]? {
        var parameters: [String: String] = [:]
        for (index, segment) in segments.enumerated() {
            switch segment {
            case .literal(let text):
                guard index < parts.count, parts[index] == text else { return nil }
            case .parameter(let name):
                guard index < parts.count, !parts[index].isEmpty else { return nil }
                parameters[name] = parts[index]
            case .remainder(let name):
                guard index < parts.count else { return nil }
                parameters[name] = parts[index...].joined(separator: "/")
                return parameters
            }
        }
        return segments.count == parts.count ? parameters : nil
    }
}

/// Who may call a route (behaviour §11, §12 Permissions).
enum RouteAccess: Sendable, Equatable {
    /// No API key: health, readiness, metrics, the sign-in callback.
    case open
    /// An API key with this permission.
    case requires(Permission)
}

/// What the request pipeline reads for a route before its handler runs.
enum RouteBody: Sendable, Equatable {
    /// Nothing: the handler reads the request itself (query, raw body to relay).
    case none
    /// A JSON object body, read once by ``JSONBody`` (415, 400 `field: body`).
    case json
}

/// The route-specific part of preparing a request, run once per request after authentication
/// and body reading and before the handler, on the server thread when the caller was known in
/// memory, else in the suspended step. It must not block (no I/O). It may refine the request
/// (e.g. the silent route's parsed request and body correlation id), answer it (a response),
/// or throw a problem; nil hands the request on to the handler.
typealias RoutePreparation = @Sendable (inout RouteRequest) throws -> HTTPResponse?

typealias RouteHandler = @Sendable (RouteRequest) async throws -> HTTPResponse

/// What a route handler gets: the request, its path parameters, its per-request context, and
/// what the pipeline prepared (the JSON body, the route's own reading), never derived twice.
struct RouteRequest: Sendable {
    let http: HTTPRequest
    let parameters: [String: String]
    var context: RequestContext
    /// The JSON body for routes declared `body: .json`; empty for the others.
    var body = JSONBody(members: [:])
    /// The silent-token request read (scopes canonical) by the silent route's preparation.
    var silent: SilentTokenRequest?

    init(http: HTTPRequest, parameters: [String: String], context: RequestContext) {
        self.http = http
        self.parameters = parameters
        self.context = context
    }

    func parameter(_ name: String) -> String { parameters[name] ?? "" }
}
