import HTTPCommon
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayStore
import TokenRelayUpstream

/// Matches a method and path against route templates such as `/v1/accounts/{account_id}` and
/// `/v1/downstream/{api}/{path...}` (the last form takes the rest of the path, several segments).
///
/// Unknown paths are 404 `not_found`; a known path with another method is 405 with `Allow`
/// (behaviour §12 Problems).
package struct Router: Sendable {
    package enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
        case remainder(String)
    }

    /// A registered route. A class: a matched route is handed through the prepared request to
    /// the suspended step, and a struct of eight members cost a retain and a release of each at
    /// every hand-over (behaviour §10).
    package final class Route: Sendable {
        package let method: String
        package let template: String
        package let segments: [Segment]
        package let access: RouteAccess
        /// `access.permissions`, made once: the getter built an array on every request.
        package let permissions: [Permission]?
        /// Whether the request pipeline reads a JSON body for the handler (``RouteRequest/body``).
        package let body: RouteBody
        /// The query parameters the route takes; the pipeline refuses any other (``RouteQuery``).
        package let query: RouteQuery
        /// Route-specific preparation run once the caller is known (see ``RoutePreparation``).
        package let prepare: RoutePreparation?
        /// A route a person's browser visits: its problems answer a request asking for HTML with
        /// a readable page (``BrowserPage``).
        package let page: Bool
        package let handler: RouteHandler
        /// Literal segments of the template: the more, the more specific.
        package let literalCount: Int
        /// ``segments`` as the matcher reads them: literals as bytes, made once.
        fileprivate let matchers: [Matcher]
        /// The route's place in ``Router/routes``: what ``RouteMetrics`` finds its series by
        /// (hashing the template was most of a refusal's metrics; behaviour §10).
        package let index: Int

        package init(
            method: String, template: String, segments: [Segment], access: RouteAccess, body: RouteBody, query: RouteQuery,
            prepare: RoutePreparation?, page: Bool, handler: @escaping RouteHandler, literalCount: Int, index: Int
        ) {
            self.index = index
            self.method = method
            self.template = template
            self.segments = segments
            self.access = access
            permissions = access.permissions
            self.body = body
            self.query = query
            self.prepare = prepare
            self.page = page
            self.handler = handler
            self.literalCount = literalCount
            matchers = segments.map { segment in
                switch segment {
                case .literal(let text): .literal(Array(text.utf8))
                case .parameter: .parameter
                case .remainder: .remainder
                }
            }
        }
    }

    /// A template segment as ``fits(_:_:in:)`` compares it with a path's.
    fileprivate enum Matcher: Sendable {
        case literal([UInt8])
        case parameter
        case remainder
    }

    package enum Match {
        case found(Route, [String: String])
        /// The path is a route's, not the method: the methods its templates serve, and the
        /// template the path matched (the metrics' `route` label).
        case methodNotAllowed(allowed: [String], template: String)
        case notFound
    }

    package private(set) var routes: [Route] = []

    package init(routes: [Route] = []) {
        self.routes = routes
    }
    /// Templates without parameters, as (path, method, index into ``routes``): ``match(method:path:)``
    /// finds them by comparing lengths, then strings, without splitting the path and binding every template (a
    /// tenth of a cached silent request, behaviour §10) or hashing it (a scan of a dozen entries
    /// that mostly differ in length costs less). Every other request takes the general walk,
    /// with the same result.
    private var exact: [(path: String, method: String, index: Int)] = []
    /// The UTF-8 length of each of ``exact``'s paths, in its order: most entries are told apart by
    /// this alone, without touching (retaining and releasing) their strings (behaviour §10).
    private var exactLengths: [Int] = []
    /// Indices into ``routes``, in registration order, of the templates a path of `n` segments can
    /// fit by its length (`n` segments, or a remainder starting at or before segment `n + 1`: it
    /// may be empty); the last entry serves every longer path. An unknown path (404) tests these
    /// few instead of every template.
    private var candidatesBySegmentCount: [[Int]] = [[]]

    /// Registers `handler` for `method` on `template`.
    /// - Parameters:
    ///   - body: `.json` to have the pipeline read the body once (415/400 before the handler runs),
    ///     `.raw` for a handler that reads it itself; with `.none` a body is 400 naming `body`.
    ///   - query: the query parameters the route takes (none unless given); the pipeline answers
    ///     any other with 400 naming it before the handler runs.
    ///   - prepare: memory-only work run before the handler, on the server thread when the
    ///     caller is known there; it may answer by itself.
    ///   - page: a route a person's browser visits (``Route/page``).
    package mutating func add(
        _ method: String, _ template: String, access: RouteAccess, body: RouteBody = .none, query: RouteQuery = .none,
        prepare: RoutePreparation? = nil, page: Bool = false, _ handler: @escaping RouteHandler
    ) {
        let segments = Self.parse(template)
        let route = Route(
            method: method, template: template, segments: segments, access: access, body: body, query: query, prepare: prepare,
            page: page, handler: handler, literalCount: segments.count { if case .literal = $0 { true } else { false } }, index: routes.count)
        // A template of literals only is the most specific match of its path: looked up directly.
        if route.literalCount == route.segments.count {
            let path = "/" + Self.split(template).joined(separator: "/")
            exact.removeAll { $0.path == path && $0.method == method }
            exact.append((path, method, routes.count))
            exactLengths = exact.map(\.path.utf8.count)
        }
        routes.append(route)
        let longest = routes.map(\.segments.count).max() ?? 0
        candidatesBySegmentCount = (0...longest + 1).map { count in
            routes.indices.filter { index in
                let segments = routes[index].segments
                return segments.count == count || (Self.endsInRemainder(segments) && count >= segments.count - 1)
            }
        }
    }

    /// The same handler for several methods (e.g. every method a relay passes through).
    package mutating func add(
        _ methods: [String], _ template: String, access: RouteAccess, body: RouteBody = .none, query: RouteQuery = .none,
        _ handler: @escaping RouteHandler
    ) {
        for method in methods { add(method, template, access: access, body: body, query: query, handler) }
    }

    package func match(method: String, path: String) -> Match {
        let length = path.utf8.count
        for position in exactLengths.indices where exactLengths[position] == length {
            let entry = exact[position]
            if entry.method == method && entry.path == path { return .found(routes[entry.index], [:]) }
        }
        let bytes = path.utf8.span
        let parts = Self.segmentRanges(bytes)
        // Only the templates with the most literal segments that fit the path decide, as in
        // OpenAPI path matching: `/v1/accounts/import` is that route (405 for GET), never the
        // account `import` of `/v1/accounts/{account_id}`. Templates are tested in place and
        // only the chosen one binds its parameters: an unknown path (404) walks every template,
        // and copying each route and binding a dictionary per template was most of a 404's cost.
        var mostLiterals = -1
        var found: Int?
        var matched: Int?
        var allowed: [String] = []
        for index in candidatesBySegmentCount[min(parts.count, candidatesBySegmentCount.count - 1)] {
            guard routes[index].literalCount >= mostLiterals, Self.fits(routes[index].matchers, parts, in: bytes) else { continue }
            if routes[index].literalCount > mostLiterals {
                mostLiterals = routes[index].literalCount
                found = nil
                matched = index
                allowed.removeAll(keepingCapacity: true)
            }
            let routeMethod = routes[index].method
            if found == nil, routeMethod == method || (method == "HEAD" && routeMethod == "GET") {
                found = index
            }
            allowed.append(routeMethod)
        }
        if let found { return .found(routes[found], Self.bind(routes[found].segments, to: parts, of: path)) }
        // A GET route answers HEAD too (RFC 9110 §9.3.2): `Allow` lists every method served (§10.2.1).
        if allowed.contains("GET") && !allowed.contains("HEAD") { allowed.append("HEAD") }
        guard let matched else { return .notFound }
        return .methodNotAllowed(allowed: allowed, template: routes[matched].template)
    }

    /// The templates in OpenAPI form (`{path}` for a remainder), for the route-parity test.
    package var openAPIOperations: [(method: String, path: String)] {
        routes.flatMap { route -> [(method: String, path: String)] in
            let path = route.template.replacingOccurrences(of: "...}", with: "}")
            // A GET route answers HEAD too (RFC 9110 §9.3.2, ``match(method:path:)``): both are served.
            return route.method == "GET" ? [("GET", path), ("HEAD", path)] : [(route.method, path)]
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
            return .literal(String(part))
        }
    }

    /// Splits on the byte `/`, not on Characters: a combining mark or an emoji skin-tone modifier
    /// right after `/` joins it into one grapheme cluster, which hid the separator (found by
    /// schemathesis: `DELETE /v1/accounts/🏻` answered 404 "no route").
    private static func split(_ path: String) -> [Substring] {
        path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map { Substring($0) }
    }

    /// The segments of a request path as byte offsets in its UTF-8, empty ones left out (`//` reads
    /// as `/`): ``split(_:)`` without a `Substring` per segment (an unknown path's 404 split and
    /// compared every template's segments as Substrings, most of its cost; behaviour §10).
    private static func segmentRanges(_ bytes: Span<UInt8>) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        ranges.reserveCapacity(8)
        var start = 0
        for index in 0..<bytes.count where bytes[index] == UInt8(ascii: "/") {
            if index > start { ranges.append(start..<index) }
            start = index + 1
        }
        if bytes.count > start { ranges.append(start..<bytes.count) }
        return ranges
    }

    /// The path's `range` as a `Substring` of `path`.
    private static func substring(_ path: String, _ range: Range<Int>) -> Substring {
        let utf8 = path.utf8
        let start = utf8.index(utf8.startIndex, offsetBy: range.lowerBound)
        return Substring(utf8[start..<utf8.index(start, offsetBy: range.count)])
    }

    /// Whether `segments` match `parts`: literals equal, parameters non-empty, a remainder takes
    /// what is left, none included: the route judges an empty one (`/v1/downstream/graph/` is
    /// 400 naming `path`, as `/v1/downstream/graph//me` is, where it was 404 "no route").
    private static func fits(_ matchers: [Matcher], _ parts: [Range<Int>], in bytes: Span<UInt8>) -> Bool {
        let endsInRemainder = if case .some(.remainder) = matchers.last { true } else { false }
        guard matchers.count == parts.count || endsInRemainder else { return false }
        for index in matchers.indices {
            guard index < parts.count else { return endsInRemainder && index == matchers.count - 1 }
            switch matchers[index] {
            case .literal(let text):
                // Bytes, as RFC 3986 compares paths (a String comparison is canonical equivalence,
                // several times the cost).
                let part = parts[index]
                guard part.count == text.count else { return false }
                let literal = text.span
                for offset in 0..<literal.count where bytes[part.lowerBound + offset] != literal[offset] { return false }
            case .parameter:
                // ``segmentRanges(_:)`` gives no empty segment.
                continue
            case .remainder:
                return true
            }
        }
        return matchers.count == parts.count
    }

    private static func endsInRemainder(_ segments: [Segment]) -> Bool {
        if case .some(.remainder) = segments.last { true } else { false }
    }

    /// The parameters of a template that ``fits(_:_:)`` the path, each segment decoded (an encoded
    /// `/` is part of its segment, ``HTTPRequest/path``). A remainder is the path as sent after
    /// the segment before it and its `/`, with `%2F` and `%25` still encoded: empty segments and a
    /// trailing `/` stay in it, for the route to judge (a downstream path may hold none,
    /// behaviour §6.2), where routing itself reads `//` as `/`.
    private static func bind(_ segments: [Segment], to parts: [Range<Int>], of path: String) -> [String: String] {
        var parameters: [String: String] = [:]
        for (index, segment) in segments.enumerated() {
            switch segment {
            case .literal: continue
            case .parameter(let name): parameters[name] = HTTPRequest.decodedSegment(substring(path, parts[index]))
            case .remainder(let name):
                let utf8 = path.utf8
                var start = utf8.index(utf8.startIndex, offsetBy: index == 0 ? 0 : parts[index - 1].upperBound)
                if start < utf8.endIndex && utf8[start] == UInt8(ascii: "/") { start = utf8.index(after: start) }
                parameters[name] = String(Substring(utf8[start...]))
                return parameters
            }
        }
        return parameters
    }
}

/// What the request pipeline reads for a route before its handler runs.
package enum RouteBody: Sendable, Equatable {
    /// None: a request with a body (one byte or more) is 400 naming `body`, as a query parameter
    /// the route does not take is (behaviour §7.4); it was ignored, so a caller sending options
    /// to a route that takes none never learnt they did nothing.
    case none
    /// A JSON object body, read once by ``JSONBody`` (415, 400 `field: body`).
    case json
    /// The raw bytes, for the handler to read (the silent route's body memo) or pass on (the
    /// downstream relay).
    case raw

    /// - Throws: `RelayError` 400 `invalid_request` naming `body` when the route takes none and
    ///   `body` holds a byte.
    package func check(_ body: [UInt8]) throws(RelayError) {
        guard self == .none, !body.isEmpty else { return }
        throw RelayError.invalidRequest(field: "body", "This route takes no request body; send none.")
    }
}

/// Which query parameters a route takes (behaviour §7.4): one rule for every route, checked by
/// the request pipeline once the caller is known (``AppHTTPHandler``), so that a misspelt or
/// misplaced parameter is a 400 naming it rather than silently ignored, and so is one of its
/// parameters sent twice (each names one thing, behaviour §7.4: the first is never silently
/// chosen). Values are the route's to judge.
package enum RouteQuery: Sendable, Equatable {
    /// No query parameter at all (most routes).
    case none
    /// These names only, in the order the problem's `detail` lists them.
    case only([String])
    /// Any: the downstream relay passes the query on as sent, and the sign-in callback ignores
    /// what the identity platform adds to its own (`session_state`, `client_info`, ...;
    /// RFC 6749 §4.1.2: a client ignores unrecognized response parameters).
    case any

    /// Pieces of the query with neither name nor value (`?&&limit=1&`) carry nothing and are
    /// ignored, as URL parsers read them (WHATWG URL's `application/x-www-form-urlencoded`
    /// parser, ASP.NET Core's `QueryHelpers`); they were refused naming the field "".
    /// - Throws: `RelayError` 400 `invalid_request` naming `query` for a value without a name
    ///   (`?=1`), else the first parameter the route does not take, or else the first of its own
    ///   given twice.
    package func check(_ query: [(name: String, value: String)]) throws(RelayError) {
        if case .any = self { return }
        for item in query where item.name.isEmpty && !item.value.isEmpty {
            throw RelayError.invalidRequest(field: "query", "A query parameter has a value but no name ('=…'); name it or leave it out.")
        }
        // What is left without a name has no value either: nothing to judge.
        let query = query.filter { !$0.name.isEmpty }
        switch self {
        case .any:
            return
        case .none:
            guard let name = query.first.map({ QuotedText.shown($0.name) }) else { return }
            throw RelayError.invalidRequest(field: name, "Unknown query parameter '\(name)'; this route takes none.")
        case .only(let names):
            for item in query where !names.contains(item.name) {
                let choices = names.count > 1 ? names.dropLast().joined(separator: ", ") + " or " + names.last! : names.joined()
                // The client's name, quoted shortened (``QuotedText``).
                let name = QuotedText.shown(item.name)
                throw RelayError.invalidRequest(field: name, "Unknown query parameter '\(name)'; use \(choices).")
            }
            // At most 100 parameters reach a route (`maxQueryParameters`): comparing pairs needs no set.
            for (index, item) in query.enumerated() where query[..<index].contains(where: { $0.name == item.name }) {
                throw RelayError.invalidRequest(field: item.name, "Send the query parameter '\(item.name)' once.")
            }
        }
    }
}

/// The route-specific part of preparing a request, run once per request after authentication
/// and body reading and before the handler, on the server thread when the caller was known in
/// memory, else in the suspended step. It must not block (no I/O). It may refine the request
/// (e.g. the silent route's parsed request and body correlation id), answer it (a response),
/// or throw a problem; nil hands the request on to the handler.
package typealias RoutePreparation = @Sendable (inout RouteRequest) throws -> HTTPResponse?

package typealias RouteHandler = @Sendable (RouteRequest) async throws -> HTTPResponse

/// What a route handler gets: the request, its path parameters, its per-request context, and
/// what the pipeline prepared (the JSON body, the route's own reading), never derived twice.
package struct RouteRequest: Sendable {
    package let received: ReceivedRequest
    /// Lent, not returned: a getter hands out a copy, a reference count for each of its fields.
    package var http: HTTPRequest { _read { yield received.http } }
    package let parameters: [String: String]
    package var context: RequestContext
    /// The JSON body for routes declared `body: .json`; empty for the others.
    package var body = JSONBody(members: [:])
    /// The silent-token request's plan (scopes canonical), taken as far as memory goes by the
    /// silent route's preparation when memory could not answer it.
    package var silentPlan: SilentPlan? {
        get { silentPlanBox?.plan }
        set { silentPlanBox = newValue.map(SilentPlanBox.init) }
    }
    /// The plan is large and a request is moved between steps: held by reference, it is
    /// neither zeroed nor copied with every request (callgrind: a sixth of a cached answer).
    private var silentPlanBox: SilentPlanBox?

    package init(received: ReceivedRequest, parameters: [String: String], context: RequestContext) {
        self.received = received
        self.parameters = parameters
        self.context = context
    }

    package func parameter(_ name: String) -> String { parameters[name] ?? "" }
}

/// A silent plan held by reference (``RouteRequest/silentPlan``).
private final class SilentPlanBox: Sendable {
    let plan: SilentPlan

    init(_ plan: SilentPlan) { self.plan = plan }
}
