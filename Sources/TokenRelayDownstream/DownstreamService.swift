import Foundation
import HTTPClientBridge
import HTTPCommon
import IdentityCore
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayStore
import TokenRelayUpstream

/// Calls a configured downstream API for an account, as the app, or on behalf of a caller's
/// user (behaviour §6; `DownstreamIdentity`): acquires the token (§2), calls
/// the API with `Authorization: Bearer`, passes the method, query, body and safe headers
/// through, and relays the API's answer, its top-level OData paging links pointed back at the
/// relay (`ODataLinkRewriter`, behaviour §6.7). A claims challenge (401 `insufficient_claims`) is
/// answered by one more acquisition with those claims, never a loop.
package struct DownstreamService: Sendable {
    package let apis: [String: DownstreamAPI]
    /// The public base URL callers reach this replica at (`PublicURLs/baseURL`), read per call.
    package let publicBaseURL: @Sendable () -> String
    package let tokens: SilentAcquisition
    package let grants: GrantTokenService
    package let http: RetryingHTTPClient
    package let maxAttempts: Int
    package let maxRetryAfterSeconds: Int
    /// Retry-After answers of the APIs, per (api, identity, path) (behaviour §5, §12 Downstream);
    /// shared with ``SilentAcquisition/throttles``, which forgets an account's entries.
    package let throttle: ThrottleMemory

    package init(
        apis: [String: DownstreamAPI], publicBaseURL: @escaping @Sendable () -> String, tokens: SilentAcquisition, grants: GrantTokenService,
        http: RetryingHTTPClient, maxAttempts: Int, maxRetryAfterSeconds: Int, throttle: ThrottleMemory
    ) {
        self.apis = apis
        self.publicBaseURL = publicBaseURL
        self.tokens = tokens
        self.grants = grants
        self.http = http
        self.maxAttempts = maxAttempts
        self.maxRetryAfterSeconds = maxRetryAfterSeconds
        self.throttle = throttle
    }

    /// Methods relayed (behaviour §6 `{ANY}`); HEAD is routed with GET.
    package static let relayedMethods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    /// Methods that are not idempotent (RFC 9110 §9.2.2): retried only on 429, on 503 with
    /// Retry-After, or when no byte of the request was sent (behaviour §5).
    package static let nonIdempotentMethods: Set<String> = ["POST", "PATCH"]

    /// Request headers passed to the API; everything else (hop-by-hop, the caller's
    /// `Authorization`, TokenRelay's own) stays here. The caller's `traceparent` and `tracestate`
    /// are not passed as they came: each attempt sends its own span's (``RetryingHTTPClient``,
    /// behaviour §8.11).
    package static let forwardedRequestHeaders = [
        "Content-Type", "Accept", "If-Match", "If-None-Match", "Prefer", "ConsistencyLevel", "client-request-id",
    ]
    /// Response headers relayed to the caller.
    package static let relayedResponseHeaders = ["Content-Type", "Retry-After", "WWW-Authenticate", "ETag", "Location", "request-id", "client-request-id"]

    package struct Call: Sendable {
        package let api: String
        /// The path below the API's base URL as the router gave it: segments separated by `/`,
        /// each still holding its `%2F` and `%25` (``HTTPRequest/path``).
        package let path: String
        package let method: String
        package let query: [(name: String, value: String)]
        package let headers: HTTPHeaders
        package let body: [UInt8]
        /// Whose token; an `X-Account-Id` external id is replaced by its account id on arrival.
        package var identity: DownstreamIdentity

        package init(
            api: String, path: String, method: String, query: [(name: String, value: String)], headers: HTTPHeaders, body: [UInt8], identity: DownstreamIdentity
        ) {
            self.api = api
            self.path = path
            self.method = method
            self.query = query
            self.headers = headers
            self.body = body
            self.identity = identity
        }

        /// ``path``'s segments, each decoded (an encoded `/` is part of its segment; `%00` stays
        /// three characters), empty ones included.
        package var decodedSegments: [String] {
            path.split(separator: "/", omittingEmptySubsequences: false).map(HTTPRequest.decodedSegment)
        }

        /// The throttle-memory key: the API, whose token, and the path. Same path, same
        /// throttled resource (Graph throttles per resource and workload, not per URL query).
        package var throttleKey: ThrottleMemory.Key {
            ThrottleMemory.downstreamKey(api: api, identity: identity.throttleIdentity, path: path, accountId: identity.accountId)
        }
    }

    /// - Throws: `RelayError` naming what the call sent (``RelayError/nameDownstreamInput(identity:)``).
    package func relay(_ call: Call, context: RequestContext) async throws -> HTTPResponse {
        do {
            return try await relayCall(call, context: context)
        } catch var problem as RelayError {
            problem.nameDownstreamInput(identity: call.identity)
            throw problem
        }
    }

    private func relayCall(_ call: Call, context: RequestContext) async throws -> HTTPResponse {
        var call = call
        guard let api = apis[call.api] else {
            throw RelayError(.notFound, "No downstream API named '\(call.api)' is configured.", extensions: ["field": .string("api")])
        }
        // The call must stay below the API's base URL: no dot segments, no empty segments, not
        // even inside a segment's encoded `/` (`..%2F..%2Fv1.0`), which an API may decode.
        let parts = call.decodedSegments.flatMap { $0.split(separator: "/", omittingEmptySubsequences: false) }
        // The bridge leaves an encoded NUL as the three characters `%00` (a `%` of the text is
        // `%25`), and `decodedSegment` keeps them: unchecked, `me%00` was relayed as the literal
        // `me%2500`, another resource than the one asked for. NUL is a control character.
        guard !call.path.isEmpty, !parts.contains(where: { $0.isEmpty || Self.isDotSegment($0) }),
            !call.path.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }), !call.path.contains("%00")
        else {
            throw RelayError.invalidRequest(
                field: "path",
                "The downstream path may not be empty or contain '.', '..' (also with ';' parameters or '\\'), empty segments or control characters.")
        }
        try Self.checkForwardedHeaders(call.headers)
        // `Content-Encoding` is not passed on: the API would read coded bytes as plain ones.
        if !call.body.isEmpty { try call.headers.requireIdentityCoding() }
        // An external id in `X-Account-Id` (behaviour §3.7) names its account from here on, in the
        // throttle memory too (whose entries go with the account's other memories).
        if case .account(let value) = call.identity, context.owner != nil, !ExternalId.looksLikeAccountId(value) {
            call.identity = .account(try await tokens.resolve(.accountId(value), owner: context.owner).accountId)
        }
        // Asked before a token is acquired: a held-back call costs no acquisition (and no STS call).
        do { try upstream.admit(call.throttleKey, target: "downstream") } catch { throw Self.heldBack(call, error) }
        // App-only and on-behalf-of calls: one token, the API's answer relayed as it is (a claims
        // challenge goes back to the caller, whose client must answer it).
        if let token = try await call.identity.grantToken(for: api, named: call.api, grants: grants, context: context) {
            return relayed(try await send(call, api: api, token: token, context: context), from: api, named: call.api)
        }
        guard case .account(let accountId) = call.identity else { throw RelayError(.internal, "No identity for the downstream call.") }
        let scopes = try DownstreamIdentity.scopes(api.scopes, api: call.api)
        let account = try await tokens.resolve(.accountId(accountId))
        var request = SilentTokenRequest(account: .accountId(accountId), scopes: scopes)
        let first = try await tokens.acquire(request, for: account, context: context)
        var response = try await send(call, api: api, token: first.token.secret, context: context)

        if response.status == 401, let challenge = response.headers["WWW-Authenticate"], let claims = ClaimsChallenge.claims(fromWWWAuthenticate: challenge) {
            // Cases 18, 19: the token is refused before its exp; it leaves every cache (every
            // replica), one acquisition with the challenge's claims (merged with the client
            // capabilities), one retry, never a loop.
            await tokens.evict(first.token)
            request.claims = claims
            let second: SilentTokenResult
            do {
                second = try await tokens.acquire(request, for: account, context: context)
            } catch let problem as RelayError where problem.code == .interactionRequired {
                throw Self.challenged(problem, claims: claims, challenge: challenge, account: account, scopes: scopes)
            }
            response = try await send(call, api: api, token: second.token.secret, context: context)
            if response.status == 401, let again = response.headers["WWW-Authenticate"],
                let claimsAgain = ClaimsChallenge.claims(fromWWWAuthenticate: again)
            {
                // The token that met the claims is refused too: only the user can answer now.
                await tokens.evict(second.token)
                let problem = RelayError(
                    .interactionRequired, "'\(call.api)' refused the token acquired with its claims challenge; the user must sign in and meet it.",
                    extensions: ["account_state": .string("active")])
                throw Self.challenged(problem, claims: claimsAgain, challenge: again, account: account, scopes: scopes)
            }
        }
        return relayed(response, from: api, named: call.api)
    }

    /// Whether a decoded path segment is one some server reads as `.` or `..` (RFC 3986 §3.3,
    /// §5.2.4): the segment itself, or any piece of it between `\` (IIS and other Windows servers
    /// read it as `/`) whose part before a `;` (a path parameter: Tomcat and other servlet
    /// containers read `..;x` as `..`) is `.` or `..`.
    package static func isDotSegment(_ segment: Substring) -> Bool {
        segment.split(separator: "\\", omittingEmptySubsequences: false).contains { piece in
            let name = piece.prefix { $0 != ";" }
            return name == "." || name == ".."
        }
    }

    /// The forwarded request headers hold no control character but HTAB (RFC 9110 §5.5: a field
    /// value is visible characters, spaces and tabs): 400 naming the first that does, before any
    /// call. libcurl would have refused a CR as a malformed request (and the caller seen 503 after
    /// retries) and cut a value at a NUL; the other control bytes were passed on.
    package static func checkForwardedHeaders(_ headers: HTTPHeaders) throws(RelayError) {
        for name in forwardedRequestHeaders {
            for value in headers.values(for: name) where value.utf8.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
                throw RelayError.invalidRequest(
                    field: name, "The header '\(name)' holds a control character; a field value may hold none but HTAB (RFC 9110 §5.5).")
            }
        }
    }

    /// 409 `interaction_required` for a resource's claims challenge that no silent acquisition
    /// answers (behaviour §6, §12 Downstream; identity platform "Claims challenges, claims requests,
    /// and client capabilities"): the resource's `claims`, its `WWW-Authenticate` forwarded, and
    /// a `sign_in_url` whose authorize request carries the claims (merged with any the STS asked
    /// for), so the user's sign-in meets the challenge.
    package static func challenged(_ problem: RelayError, claims: String, challenge: String, account: AccountRecord, scopes: ScopeSet) -> RelayError {
        var problem = problem
        let linkClaims = SignInHint.claims(for: problem, requested: claims)
        problem.extensions["claims"] = .string(claims)
        problem.challenge = challenge
        problem.signInHint = SignInHint(account: account, scopes: scopes.canonical, claims: ClaimsRequest.combined(linkClaims, challenge: claims))
        return problem
    }

    private func send(_ call: Call, api: DownstreamAPI, token: String, context: RequestContext) async throws -> HTTPClientResponse {
        var headers = HTTPHeaders()
        for name in Self.forwardedRequestHeaders {
            for value in call.headers.values(for: name) { headers.add(name, value) }
        }
        headers.set("Authorization", "Bearer " + token)
        if !headers.contains("client-request-id"), context.correlationIdIsGUID { headers.set("client-request-id", context.correlationId) }
        let query = call.query.isEmpty ? "" : "?" + FormEncoding.query(call.query.map { ($0.name, $0.value) })
        // Each segment as the caller encoded it: an encoded `/` stays inside its segment (`%2F`).
        let path = call.decodedSegments.map(FormEncoding.pathEscape).joined(separator: "/")
        let url = api.baseURL + "/" + path + query
        let idempotent = !Self.nonIdempotentMethods.contains(call.method.uppercased())
        let policy = RetryPolicy(target: .downstream(idempotent: idempotent), maxAttempts: maxAttempts, maxRetryAfter: maxRetryAfterSeconds)

        let request = HTTPClientRequest(method: call.method, url: url, headers: headers, body: call.body.isEmpty ? nil : call.body)
        let final: RetryingHTTPClient.Final
        do {
            final = try await upstream.send(request, throttleKey: call.throttleKey, policy: policy, target: "downstream", context: context) { attempt in
                switch attempt {
                case .success(let response):
                    return .response(
                        status: response.status, retryAfterSeconds: RetryAfter.seconds(response.headers["Retry-After"], now: http.clock.now()),
                        nonRetryable: false)
                case .failure(let error) where error.kind == .tooLarge:
                    // The API answered, with more than the relay carries: the same answer would
                    // come again, so it is final, not a network failure to retry.
                    return .response(status: 502, retryAfterSeconds: nil, nonRetryable: true)
                case .failure(let error):
                    return .init(error)
                }
            }
        } catch {
            switch error {
            case .heldBack(let held): throw Self.heldBack(call, held)
            case .problem(let problem): throw problem
            }
        }
        switch (final.last, final.decision) {
        case (.success(var response), .giveUp(let retryAfter)):
            if response.status == 429 { http.metrics.increment("tokenrelay_throttled_total", ["target": "downstream", "reason": "upstream"]) }
            // behaviour §12 Downstream: a 429 or 503 without Retry-After gets the backoff we would have used.
            if (response.status == 429 || response.status == 503) && response.headers["Retry-After"] == nil {
                response.headers.set("Retry-After", String(max(1, retryAfter ?? 1)))
            }
            return response
        case (.success(let response), _):
            return response
        case (.failure(let error), _) where error.kind == .tooLarge:
            throw RelayError(
                .upstreamError, "'\(call.api)' answered with a body larger than \(http.http.maxResponseBytes) bytes, the most the relay carries.",
                status: 502)
        case (.failure, .giveUp(let retryAfter)):
            throw RelayError.unavailable("The downstream API could not be reached.", retryAfterSeconds: max(1, retryAfter ?? 1))
        case (.failure, _):
            throw RelayError.unavailable("The downstream API could not be reached.", retryAfterSeconds: 1)
        }
    }

    /// The downstream APIs' client: the retry loop behind this service's throttle memory.
    package var upstream: ThrottledHTTPClient { ThrottledHTTPClient(retrying: http, memory: throttle) }

    /// 429 `throttled` for a call the throttle memory held back: nothing was sent (behaviour §5, §12
    /// Downstream: a problem, not a relayed answer).
    private static func heldBack(_ call: Call, _ held: ThrottledHTTPClient.HeldBack) -> RelayError {
        RelayError.throttled("'\(call.api)' asked to wait before this resource is called again.", retryAfterSeconds: held.remainingSeconds)
    }

    private func relayed(_ response: HTTPClientResponse, from api: DownstreamAPI, named name: String) -> HTTPResponse {
        var response = response
        _ = ODataLinkRewriter(apiBaseURL: api.baseURL, relayBaseURL: publicBaseURL() + "/v1/downstream/" + name).rewrite(&response)
        var headers = HTTPHeaders()
        for name in Self.relayedResponseHeaders {
            for value in response.headers.values(for: name) { headers.add(name, value) }
        }
        // The answer to a relayed HEAD has no content but the length a GET would have had: the
        // server sends it for HEAD (RFC 9110 §8.6, §9.3.2) and computes its own for anything else.
        if response.body.isEmpty, let length = response.headers["Content-Length"] { headers.set("Content-Length", length) }
        headers.set("TokenRelay-Relayed", "true")
        return HTTPResponse(status: response.status, headers: headers, body: response.body)
    }
}

extension RelayError {
    /// A downstream call has no body: the token behind it is chosen by the API's configured scopes
    /// and the identity header. A problem of that token names what the caller sent instead of a
    /// token route's member (behaviour §6.1, §12.19): `scopes` → `api`; a tenant or authority
    /// (the default authority, an assertion's `tid`, the account's own) or an assertion → the
    /// identity header; an account not found → `X-Account-Id`.
    package mutating func nameDownstreamInput(identity: DownstreamIdentity) {
        switch extensions["field"] {
        case .string("scopes")?: extensions["field"] = .string("api")
        case .string("tenant_id")?, .string("authority")?, .string("assertion")?: extensions["field"] = .string(identity.headerName)
        case nil where code == .accountNotFound: extensions["field"] = .string("X-Account-Id")
        default: break
        }
    }
}

extension FormEncoding {
    /// One path segment (RFC 3986 pchar without '/').
    package static func pathEscape(_ segment: String) -> String {
        segment.addingPercentEncoding(
            withAllowedCharacters: CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@"))!
    }
}
