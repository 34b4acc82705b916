import HTTPCommon
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

@Suite("Router")
struct RouterTests {
    static func router() -> Router {
        var router = Router()
        let ok: RouteHandler = { _ in HTTPResponse(status: 200) }
        router.add("GET", "/v1/accounts", access: .requires(.accountsRead), ok)
        router.add("GET", "/v1/accounts/{account_id}", access: .requires(.accountsRead), ok)
        router.add("DELETE", "/v1/accounts/{account_id}", access: .requires(.accountsWrite), ok)
        router.add("GET", "/v1/downstream/{api}/{path...}", access: .requires(.downstreamCall), ok)
        return router
    }

    @Test("A route's own query parameter sent twice is 400 naming it, whatever its handler reads; unknown ones are named first")
    func repeatedQueryParameter() {
        func field(_ query: [(String, String)], _ rule: RouteQuery) -> String? {
            do {
                try rule.check(query.map { (name: $0.0, value: $0.1) })
                return nil
            } catch {
                return error.extensions["field"].flatMap { if case .string(let name) = $0 { name } else { nil } }
            }
        }
        let list = RouteQuery.only(["cursor", "limit", "username"])
        #expect(field([("limit", "1"), ("username", "a"), ("limit", "1")], list) == "limit")
        #expect(field([("username", "a"), ("username", "")], list) == "username")
        #expect(field([("limit", "1"), ("limit", "2"), ("bogus", "1")], list) == "bogus")
        #expect(field([("limit", "1"), ("username", "a"), ("cursor", "")], list) == nil)
        // The downstream relay and the sign-in callback pass their query on or judge it themselves.
        #expect(field([("x", "1"), ("x", "2")], .any) == nil)
        // `?&&limit=1&`: pieces with neither name nor value are nothing (they were named "").
        #expect(field([("", ""), ("limit", "1"), ("", "")], list) == nil)
        #expect(field([("", ""), ("", "")], .none) == nil)
        #expect(field([("", "1")], .none) == "query")
        #expect(field([("limit", "1"), ("", "x")], list) == "query")
        #expect(field([("", "1")], .any) == nil)
    }

    @Test("Path parameters bind to their names")
    func parameters() {
        guard case .found(let route, let parameters) = Self.router().match(method: "DELETE", path: "/v1/accounts/acc_123") else {
            Issue.record("no match")
            return
        }
        #expect(route.template == "/v1/accounts/{account_id}")
        #expect(parameters == ["account_id": "acc_123"])
    }

    @Test(
        "A segment starting with a combining mark or emoji modifier still splits at '/'",
        arguments: ["\u{1F3FB}", "\u{0301}acc", "\u{200D}x"])
    func segmentStartingWithExtendingScalar(id: String) {
        guard case .found(let route, let parameters) = Self.router().match(method: "DELETE", path: "/v1/accounts/" + id) else {
            Issue.record("no match")
            return
        }
        #expect(route.template == "/v1/accounts/{account_id}")
        #expect(parameters["account_id"]?.unicodeScalars.elementsEqual(id.unicodeScalars) == true)
        guard case .found(_, let rest) = Self.router().match(method: "GET", path: "/v1/downstream/graph/me/" + id) else {
            Issue.record("no match for the remainder")
            return
        }
        #expect(rest["path"]?.unicodeScalars.elementsEqual(("me/" + id).unicodeScalars) == true)
    }

    @Test(
        "An encoded '/' is part of its segment (new-user attack: %2F was decoded before routing, /v1%2Faccounts was the account list)"
    )
    func encodedSlashStaysInItsSegment() {
        let router = Self.router()
        for path in ["/v1%2Faccounts", "/v1%2faccounts/acc_1"] {
            guard case .notFound = router.match(method: "GET", path: path) else {
                Issue.record("\(path) matched a route")
                continue
            }
        }
        guard case .found(let route, let parameters) = router.match(method: "GET", path: "/v1/accounts/a%2Fb%252F") else {
            Issue.record("no match")
            return
        }
        #expect(route.template == "/v1/accounts/{account_id}")
        #expect(parameters == ["account_id": "a/b%2F"])
        guard case .found(_, let rest) = router.match(method: "GET", path: "/v1/downstream/graph/users%2Falice/x%25y") else {
            Issue.record("no match for the remainder")
            return
        }
        // The remainder stays encoded: the relay decodes it segment by segment.
        #expect(rest["path"] == "users%2Falice/x%25y")
        #expect(HTTPRequest.decodedSegment("a%2fb%25%2Z%") == "a/b%%2Z%")
        #expect(HTTPRequest.decodedSegment("%00%2") == "%00%2")
    }

    @Test("A remainder parameter takes several segments")
    func remainder() {
        guard case .found(_, let parameters) = Self.router().match(method: "GET", path: "/v1/downstream/graph/me/messages/abc") else {
            Issue.record("no match")
            return
        }
        #expect(parameters == ["api": "graph", "path": "me/messages/abc"])
    }

    @Test(
        "A remainder is the path as sent: empty segments and a trailing slash stay in it for the route to refuse (new-user attack: they were dropped and the call relayed)",
        arguments: [
            ("/v1/downstream/graph/me//messages", "me//messages"), ("/v1/downstream/graph//me", "/me"), ("/v1/downstream/graph/me/", "me/"),
            ("/v1/downstream//graph/me", "me"),
        ])
    func remainderKeepsEmptySegments(path: String, rest: String) {
        guard case .found(_, let parameters) = Self.router().match(method: "GET", path: path) else {
            Issue.record("no match")
            return
        }
        #expect(parameters["path"] == rest, "\(path)")
        #expect(parameters["api"] == "graph")
    }

    @Test("A known path with another method is 405 listing the allowed methods")
    func methodNotAllowed() {
        guard case .methodNotAllowed(let allowed, let template) = Self.router().match(method: "POST", path: "/v1/accounts/acc_1") else {
            Issue.record("expected 405")
            return
        }
        #expect(allowed.sorted() == ["DELETE", "GET", "HEAD"])
        // The metrics' `route` label of the 405 (it was `unmatched`, found by a new-user try).
        #expect(template == "/v1/accounts/{account_id}")
    }

    @Test("Unknown paths and extra segments are 404")
    func notFound() {
        for path in ["/v1/account", "/v1/accounts/a/b", "/", "/v1/downstream"] {
            guard case .notFound = Self.router().match(method: "GET", path: path) else {
                Issue.record("expected 404 for \(path)")
                continue
            }
        }
    }

    /// `/v1/downstream/graph/` was 404 "no route" where `/v1/downstream/graph//me` reached the
    /// relay and was 400 naming `path` (new-user try): an empty remainder is the route's to refuse.
    @Test("A remainder may be empty: /v1/downstream/graph and /v1/downstream/graph/ reach the relay with the path empty")
    func emptyRemainder() {
        for path in ["/v1/downstream/graph", "/v1/downstream/graph/"] {
            guard case .found(let route, let parameters) = Self.router().match(method: "GET", path: path) else {
                Issue.record("expected the relay for \(path)")
                continue
            }
            #expect(route.template == "/v1/downstream/{api}/{path...}", "\(path)")
            #expect(parameters == ["api": "graph", "path": ""], "\(path)")
        }
    }

    @Test("A path a literal template names is that route's: another method is 405, never a parameter route's match")
    func literalBeatsParameter() {
        var router = Self.router()
        router.add("POST", "/v1/accounts/import", access: .requires(.accountsWrite)) { _ in HTTPResponse(status: 201) }
        // GET and DELETE /v1/accounts/import read and deleted an account whose external id was "import".
        for method in ["GET", "DELETE"] {
            guard case .methodNotAllowed(let allowed, _) = router.match(method: method, path: "/v1/accounts/import") else {
                Issue.record("\(method) /v1/accounts/import was not 405")
                continue
            }
            #expect(allowed == ["POST"])
        }
        guard case .found(let route, _) = router.match(method: "POST", path: "/v1/accounts/import") else {
            Issue.record("POST /v1/accounts/import did not match")
            return
        }
        #expect(route.template == "/v1/accounts/import")
        guard case .found(let other, let parameters) = router.match(method: "GET", path: "/v1/accounts/imported") else {
            Issue.record("another id did not match")
            return
        }
        #expect(other.template == "/v1/accounts/{account_id}" && parameters == ["account_id": "imported"])
    }

    @Test("HEAD is served by the GET route")
    func head() {
        guard case .found = Self.router().match(method: "HEAD", path: "/v1/accounts") else {
            Issue.record("HEAD did not match GET")
            return
        }
    }

    @Test("The exact-path lookup finds what the general walk finds: the literal template wins over an earlier parameter one, HEAD and odd slashes included")
    func exactPathsAgree() {
        var router = Router()
        router.add("GET", "/v1/accounts/{account_id}", access: .open) { _ in HTTPResponse(status: 201) }
        router.add("GET", "/v1/accounts/import", access: .open) { _ in HTTPResponse(status: 202) }
        router.add("POST", "/v1/accounts/import", access: .open) { _ in HTTPResponse(status: 203) }
        router.add("GET", "/healthz", access: .open) { _ in HTTPResponse(status: 204) }
        let cases: [(String, String, String?)] = [
            ("GET", "/v1/accounts/import", "/v1/accounts/import"), ("GET", "/v1/accounts/other", "/v1/accounts/{account_id}"),
            ("POST", "/v1/accounts/import", "/v1/accounts/import"),
            ("HEAD", "/healthz", "/healthz"), ("GET", "/healthz/", "/healthz"), ("GET", "//healthz", "/healthz"), ("PUT", "/healthz", nil),
        ]
        for (method, path, template) in cases {
            switch router.match(method: method, path: path) {
            case .found(let route, _): #expect(route.template == template, "\(method) \(path)")
            case .methodNotAllowed(let allowed, _): #expect(template == nil && allowed == ["GET", "HEAD"], "\(method) \(path)")
            case .notFound: Issue.record("\(method) \(path): not found")
            }
        }
    }
}
