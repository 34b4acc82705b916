import CryptoBridge
import Foundation
import IdentityCore
import Synchronization
import TokenRelayBase
import TokenRelayStore
import TokenRelayUpstream

/// Tokens of the two grants that need no account (behaviour §2, §12): the service's own app tokens
/// (client credentials, RFC 6749 §4.4) and on-behalf-of tokens for a caller's user (RFC 7523
/// §2.1 jwt-bearer with `requested_token_use=on_behalf_of`; identity platform "On-behalf-of
/// flow"). Both are cached in this replica's memory and, encrypted, in `grant_access_tokens` so
/// replicas share them; concurrent misses for one key make one STS call per process.
package struct GrantTokenService: Sendable {
    package let store: TokenStore
    package let sts: STSClient
    package let authorities: AuthorityValidator
    package let defaultAuthority: Authority
    package let memory: GrantTokenMemory
    package let coalescer: RefreshCoalescer<Outcome>
    package let clientCapabilities: [String]
    package let expirySkewSeconds: Int
    package let metrics: Metrics
    package let logger: Logger
    package let now: @Sendable () -> Int

    package init(
        store: TokenStore, sts: STSClient, authorities: AuthorityValidator, defaultAuthority: Authority, memory: GrantTokenMemory,
        coalescer: RefreshCoalescer<Outcome>, clientCapabilities: [String], expirySkewSeconds: Int, metrics: Metrics, logger: Logger,
        now: @escaping @Sendable () -> Int, suspensions: TenantSuspensions = TenantSuspensions()
    ) {
        self.store = store
        self.sts = sts
        self.authorities = authorities
        self.defaultAuthority = defaultAuthority
        self.memory = memory
        self.coalescer = coalescer
        self.clientCapabilities = clientCapabilities
        self.expirySkewSeconds = expirySkewSeconds
        self.metrics = metrics
        self.logger = logger
        self.now = now
        self.suspensions = suspensions
    }
    /// When this replica last purged expired OBO rows (unix seconds).
    package let lastPurge = LastRun()
    /// Suspended tenants: their app and on-behalf-of tokens are refused (behaviour §12 Tenants).
    package var suspensions = TenantSuspensions()

    package static let jwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"

    package enum Outcome: Sendable {
        case token(StoredAccessToken, source: SilentTokenResult.Source)
        case problem(RelayError)
    }

    /// What the caller asked for, after validation.
    package struct Request: Sendable {
        package var scopes: ScopeSet
        /// Another authority (or tenant) than the configured one.
        package var authority: Authority?

        package var forceRefresh = false
        package var minTTLSeconds = 0
        /// The members that chose the scopes and authority, named by the problems about them:
        /// `tenant_id` only when it chose the authority, else `authority` (behaviour §4.1, §4.3).
        package var inputFields = RelayError.InputFields()

        package init(
            scopes: ScopeSet, authority: Authority? = nil, forceRefresh: Bool = false, minTTLSeconds: Int = 0,
            inputFields: RelayError.InputFields = RelayError.InputFields()
        ) {
            self.scopes = scopes
            self.authority = authority
            self.forceRefresh = forceRefresh
            self.minTTLSeconds = minTTLSeconds
            self.inputFields = inputFields
        }
    }

    /// A token and where it came from (`cache`, `identity_provider`, or `refresh` for an OBO
    /// refresh-token redemption).
    package struct Result: Sendable {
        package let token: StoredAccessToken
        package let source: SilentTokenResult.Source
    }

    // MARK: App tokens

    /// An app token for one `{resource}/.default` in one tenant, owner `app:{tenant}`.
    /// - Throws: `RelayError`: 400 `invalid_scope` (not exactly one `/.default`), 400
    ///   `invalid_request` (no tenant: the authority is `common`/`organizations`/`consumers`),
    ///   403 `forbidden` (the API key may not use the scope or tenant), 403 `tenant_suspended`,
    ///   the mapped STS errors (behaviour §4), 503 when the database or STS is unavailable.
    package func acquireApp(_ request: Request, context: RequestContext) async throws -> Result {
        guard request.scopes.canonical.count == 1, request.scopes.isDefaultScope else {
            throw RelayError(
                .invalidScope, "App tokens take exactly one scope of the form '{resource}/.default'.", extensions: ["field": .string("scopes")])
        }
        let authority = request.authority ?? defaultAuthority
        // Named by the member that chose the authority: `authority`, or `tenant_id` when that did;
        // `authority` when neither did (the configured one), the member that would choose another.
        guard !authority.isMultiTenant else {
            throw RelayError.invalidRequest(
                field: request.inputFields.authority,
                "App tokens are issued by one tenant: give 'tenant_id' or an authority naming a tenant, not '\(authority.tenant)'.")
        }
        try context.access.check(request.scopes, field: "scopes")
        try context.access.check(tenant: authority.tenant, field: request.inputFields.authority)
        let realm = authority.tenant.lowercased()
        try suspensions.check(tenant: realm)
        let owner = "app:" + realm
        let result = try await acquire(owner: owner, authority: authority, realm: realm, request: request, ownerExpiresOn: nil, context: context) {
            try await sts.redeem(
                grant: [("grant_type", "client_credentials"), ("scope", request.scopes.resourceWireValue)], authority: authority, scopes: nil,
                claims: try? ClaimsRequest.merged(claims: nil, capabilities: clientCapabilities), context: context)
        }
        // A tenant named by a domain (`contoso.onmicrosoft.com`) is known by its id only from the
        // token: its `tid` is checked too, so a suspended tenant is not served under another name
        // (the first such request makes its STS call; the cached token is refused after that).
        if UUID(uuidString: realm) == nil, let tenantId = Self.tenantClaim(of: result.token.secret) {
            try suspensions.check(tenant: tenantId)
        }
        return result
    }

    /// The `tid` claim of an access token that is a JWT (Entra's are, for Microsoft Graph and most
    /// resources), without verifying it; nil otherwise.
    package static func tenantClaim(of accessToken: String) -> String? {
        (try? JWT.parse(accessToken))?.claims["tid"]?.stringValue
    }

    // MARK: On-behalf-of tokens

    /// A token for the user of `assertion` (the caller's incoming access token), owner
    /// `obo:{sha256(assertion)}`. A stored OBO refresh token is redeemed first when the cache
    /// has nothing for these scopes; the assertion is exchanged when there is none or the STS
    /// refuses it.
    ///
    /// The assertion is checked only for shape and expiry (`exp`), not its signature: validating
    /// the incoming token is the job of the caller's API, and the STS validates it again.
    /// - Throws: `RelayError`: 400 `invalid_request` field `assertion` (malformed, expired, or the
    ///   STS refused it) without an STS call for the first two; the mapped STS errors, with
    ///   `claims` on `interaction_required` for the caller to send back to its client; 403
    ///   `tenant_suspended` when the assertion's `tid` or the tenant exchanged in is suspended.
    package func acquireOnBehalfOf(assertion: String, _ request: Request, context: RequestContext) async throws -> Result {
        let (expiresOn, tenantId) = try Self.inspect(assertion: assertion, now: now())
        let authority = userTenantAuthority(request.authority ?? defaultAuthority, tenantId: tenantId)
        try context.access.check(request.scopes, field: "scopes")
        try context.access.check(tenant: authority.tenant, field: "authority")
        let realm = authority.tenant.lowercased()
        // The user's tenant (the assertion's `tid`) and the tenant exchanged in.
        try suspensions.check(tenant: realm)
        if let tenantId { try suspensions.check(tenant: tenantId) }
        let owner = Self.onBehalfOfOwner(assertion)
        let store = self.store
        let sts = self.sts
        let claims = try? ClaimsRequest.merged(claims: nil, capabilities: clientCapabilities)
        let logger = self.logger
        let result = try await acquire(owner: owner, authority: authority, realm: realm, request: request, ownerExpiresOn: expiresOn, context: context) {
            if let refreshToken = try? await store.oboRefreshToken(owner: owner, environment: authority.environment) {
                do {
                    return try await sts.redeem(
                        grant: [("grant_type", "refresh_token"), ("refresh_token", refreshToken)], authority: authority, scopes: request.scopes,
                        claims: claims, context: context)
                } catch {
                    guard case .rejected(let failure)? = error as? STSCallError, failure.disposition != .throttled, failure.disposition != .transient else {
                        throw error
                    }
                    // The assertion is still valid: exchange it again rather than fail.
                    logger.info("obo.refresh_token_refused", ["sts.error_codes": failure.stsErrorCodes.map(String.init).joined(separator: ",")])
                    try? await store.deleteOBORefreshToken(owner: owner, environment: authority.environment)
                }
            }
            return try await sts.redeem(
                grant: [("grant_type", Self.jwtBearerGrant), ("assertion", assertion), ("requested_token_use", "on_behalf_of")],
                authority: authority, scopes: request.scopes, claims: claims, context: context)
        }
        purgeExpiredOnBehalfOfRows()
        return result
    }

    /// A multi-tenant app exchanges in the user's tenant (as Microsoft.Identity.Web does): the
    /// assertion's `tid` replaces `common`/`organizations` when that authority is accepted.
    private func userTenantAuthority(_ authority: Authority, tenantId: String?) -> Authority {
        guard authority.isMultiTenant, let tenantId else { return authority }
        let candidate = Authority(scheme: authority.scheme, host: authority.host, port: authority.port, tenant: tenantId, policy: nil, type: authority.type)
        return (try? authorities.validate(candidate.url)) ?? authority
    }

    /// The assertion's `exp` and `tid`, without verifying its signature.
    /// `exp` is a NumericDate (RFC 7519 §2), which may be non-integer: read in whole seconds,
    /// rounded down (``IdentityCore/JSONValue/numericDate``).
    /// - Throws: `RelayError` 400 `invalid_request` field `assertion` when it is not a JWT with a
    ///   numeric `exp`, or `exp` ≤ `now`.
    package static func inspect(assertion: String, now: Int) throws(RelayError) -> (expiresOn: Int, tenantId: String?) {
        guard !assertion.isEmpty, let jwt = try? JWT.parse(assertion), let exp = jwt.claims["exp"]?.numericDate else {
            throw RelayError.invalidRequest(field: "assertion", "'assertion' must be the caller's incoming access token (a JWT with 'exp').")
        }
        guard exp > now else {
            throw RelayError.invalidRequest(field: "assertion", "The assertion expired at \(exp) (unix seconds); the caller's client must send a new token.")
        }
        return (exp, jwt.claims["tid"]?.stringValue)
    }

    // MARK: Shared path

    /// Cache (memory, then database), else one coalesced `exchange` whose tokens are stored.
    private func acquire(
        owner: String, authority: Authority, realm: String, request: Request, ownerExpiresOn: Int?, context: RequestContext,
        exchange: @escaping @Sendable () async throws -> TokenResponse
    ) async throws -> Result {
        let environment = authority.environment
        let minTTL = request.minTTLSeconds
        let usable = { (token: StoredAccessToken) in self.usable(token, minTTL: minTTL) }
        let grant = owner.hasPrefix("app:") ? "app" : "obo"
        if !request.forceRefresh {
            if let hit = memory.lookup(owner: owner, environment: environment, realm: realm, scopes: request.scopes, now: now(), usable: usable) {
                metrics.increment("tokenrelay_grant_token_cache_total", ["outcome": "hit", "layer": "memory", "grant": grant])
                return Result(token: hit, source: .cache)
            }
            let stored = try await store.grantAccessTokens(owner: owner, environment: environment, realm: realm)
            if let hit = stored.best(covering: request.scopes, now: now(), expirySkew: expirySkewSeconds, minTTL: minTTL) {
                memory.store(hit, now: now())
                metrics.increment("tokenrelay_grant_token_cache_total", ["outcome": "hit", "layer": "database", "grant": grant])
                return Result(token: hit, source: .cache)
            }
            metrics.increment("tokenrelay_grant_token_cache_total", ["outcome": "miss", "layer": "none", "grant": grant])
        }
        let key = [owner, environment, realm, request.scopes.cacheKey, request.forceRefresh ? "force" : "", String(minTTL)].joined(separator: "|")
        let service = self
        let (outcome, joined) = try await coalescer.run(key: key) {
            do {
                let response = try await exchange()
                return try await service.stored(
                    response, owner: owner, environment: environment, realm: realm, requested: request.scopes,
                    ownerExpiresOn: ownerExpiresOn, obtainedBy: context.caller)
            } catch let error as STSCallError {
                switch error {
                case .unavailable(let problem): return .problem(problem)
                case .rejected(let failure): return .problem(service.problem(failure, scopes: request.scopes))
                }
            }
        }
        if joined { metrics.increment("tokenrelay_refresh_coalesced_total") }
        switch outcome {
        case .problem(let problem): throw problem
        case .token(let token, let source):
            memory.store(token, now: now())
            return Result(token: token, source: source)
        }
    }

    /// Stores what the STS answered: the access token, and for OBO the refresh token. A failed
    /// write is logged, not fatal: the caller still gets the token.
    private func stored(
        _ response: TokenResponse, owner: String, environment: String, realm: String, requested: ScopeSet, ownerExpiresOn: Int?,
        obtainedBy: String?
    ) async throws -> Outcome {
        let granted = response.scope.map { ScopeRules.granted($0, requested: requested) } ?? requested
        let token = StoredAccessToken(
            response, accountId: owner, environment: environment, realm: realm, clientId: store.clientId,
            scopes: granted.isEmpty ? requested.canonical : granted.canonical, issuedAt: now(), obtainedBy: obtainedBy)
        do {
            try await store.saveGrantAccessToken(token, ownerExpiresOn: ownerExpiresOn)
            if let ownerExpiresOn, let refreshToken = response.refreshToken, !refreshToken.isEmpty {
                try await store.saveOBORefreshToken(owner: owner, environment: environment, realm: realm, token: refreshToken, ownerExpiresOn: ownerExpiresOn)
            }
        } catch {
            logger.error("token.cache_write_failed", ["grant": owner.hasPrefix("app:") ? "app" : "obo", "error": String(describing: type(of: error))])
        }
        return .token(token, source: .identityProvider)
    }

    /// The problem for an STS refusal. No account is involved, so `account_state` is dropped. A
    /// refused user assertion (the table's rows naming `assertion`: signature, audience, lifetime)
    /// is the caller's input, 400 on `assertion`, whatever code came first (cases/29).
    private func problem(_ failure: STSFailure, scopes: ScopeSet) -> RelayError {
        var problem = RelayError(failure, requestedScopes: scopes)
        problem.extensions["account_state"] = nil
        if failure.field == "assertion" { problem.detail = "The identity provider refused the assertion: \(failure.detail)" }
        return problem
    }

    /// Served iff `expires_on − now ≥ max(expiry_skew, min_ttl)` (behaviour §12).
    private func usable(_ token: StoredAccessToken, minTTL: Int) -> Bool {
        token.isServable(now: now(), expirySkew: expirySkewSeconds, minTTL: minTTL)
    }

    /// Deletes OBO rows of expired assertions, at most once a minute per replica, in the background.
    private func purgeExpiredOnBehalfOfRows() {
        let now = self.now()
        guard lastPurge.claim(now: now, every: 60) else { return }
        let store = self.store
        let logger = self.logger
        // In the coalescer's tasks (skipped when full or stopping: the next minute tries again).
        coalescer.tasks.startIfRoom {
            do {
                let removed = try await store.purgeExpiredOnBehalfOfTokens(now: now)
                if removed > 0 { logger.debug("obo.purged", ["rows": String(removed)]) }
            } catch {
                logger.warn("obo.purge_failed", ["error": String(describing: type(of: error))])
            }
        }
    }

    /// The owner of an assertion's OBO rows and memories: `obo:` and the assertion's SHA-256 in
    /// hex (never the assertion itself).
    package static func onBehalfOfOwner(_ assertion: String) -> String {
        "obo:" + hex(SHA256.hash(Array(assertion.utf8)))
    }

    package static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// A once-per-interval gate (unix seconds), shared by copies of a service struct.
package final class LastRun: Sendable {
    private let last = Mutex<Int>(0)

    /// True (and the time recorded) when `every` seconds passed since the last claim.
    package func claim(now: Int, every: Int) -> Bool {
        last.withLock { last in
            guard now - last >= every else { return false }
            last = now
            return true
        }
    }
}
