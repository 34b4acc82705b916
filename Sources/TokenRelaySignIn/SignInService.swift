import CryptoBridge
import Foundation
import IdentityCore
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayStore
import TokenRelayUpstream

/// Sign-in with the authorization code flow and PKCE (RFC 6749 §4.1, RFC 7636 S256, OpenID
/// Connect Core §3.1): `start` mints state, nonce and verifier and returns the authorize URL;
/// `complete` checks the state once, redeems the code, validates the id_token and stores the
/// account with its tokens (behaviour §3).
package struct SignInService: Sendable {
    package let store: TokenStore
    package let sts: STSClient
    package let metadata: OpenIDMetadataCache
    package let authorities: AuthorityValidator
    package let defaultAuthority: Authority
    package let clientId: String
    package let urls: PublicURLs
    package let redirectAfterOrigins: [String]
    package let clientCapabilities: [String]
    /// Drops what this replica remembers of an account (its tokens, account row, declined scopes).
    package let forgetInMemory: @Sendable (String) -> Void
    package let logger: Logger
    package let now: @Sendable () -> Int
    /// Mints and checks the signed `GET /v1/sign-ins/start` links problems carry as `sign_in_url`.
    package var links: SignInStartLinks? = nil
    /// This replica's requests waiting for a sign-in to finish (behaviour §3.9).
    package let followers = SignInFollowers()
    /// Whether notifications between replicas flow now: while they do not, a follower reads the
    /// sign-in again every second instead of waiting to be woken.
    package var notificationsFlow: @Sendable () -> Bool = { true }

    package init(
        store: TokenStore, sts: STSClient, metadata: OpenIDMetadataCache, authorities: AuthorityValidator, defaultAuthority: Authority, clientId: String,
        urls: PublicURLs, redirectAfterOrigins: [String], clientCapabilities: [String], forgetInMemory: @escaping @Sendable (String) -> Void, logger: Logger,
        now: @escaping @Sendable () -> Int, links: SignInStartLinks? = nil
    ) {
        self.store = store
        self.sts = sts
        self.metadata = metadata
        self.authorities = authorities
        self.defaultAuthority = defaultAuthority
        self.clientId = clientId
        self.urls = urls
        self.redirectAfterOrigins = redirectAfterOrigins
        self.clientCapabilities = clientCapabilities
        self.forgetInMemory = forgetInMemory
        self.logger = logger
        self.now = now
        self.links = links
    }

    /// A sign-in lives 10 minutes (behaviour §3).
    package static let lifetimeSeconds = 600

    package struct StartRequest: Sendable {
        package var scopes: ScopeSet
        package var authority: Authority?
        package var loginHint: String?
        package var prompt: String?
        package var claims: String?
        package var redirectAfter: String?
        /// The API key id that starts it (``linkActor`` for a signed start link), named in the
        /// audit row of its completion (behaviour §12 Audit).
        package var startedBy: String? = nil
        /// The external id the account gets when the sign-in completes (behaviour §3.7).
        package var externalId: ExternalId? = nil
        /// The user the sign-in is for (`home_account_id`, behaviour §3.8); nil: any user.
        package var expectedHomeAccountId: String? = nil
        /// That user's account, named by a refusal.
        package var expectedAccountId: String? = nil
        /// The id a signed link minted for its sign-in; nil: a new one.
        package var signInId: String? = nil

        package init(
            scopes: ScopeSet, authority: Authority? = nil, loginHint: String? = nil, prompt: String? = nil, claims: String? = nil, redirectAfter: String? = nil,
            startedBy: String? = nil, externalId: ExternalId? = nil, expectedHomeAccountId: String? = nil, expectedAccountId: String? = nil,
            signInId: String? = nil
        ) {
            self.scopes = scopes
            self.authority = authority
            self.loginHint = loginHint
            self.prompt = prompt
            self.claims = claims
            self.redirectAfter = redirectAfter
            self.startedBy = startedBy
            self.externalId = externalId
            self.expectedHomeAccountId = expectedHomeAccountId
            self.expectedAccountId = expectedAccountId
            self.signInId = signInId
        }
    }

    /// The audit actor of a sign-in started by a signed `GET /v1/sign-ins/start` link: the link
    /// carries no API key, its signature is the authority.
    package static let linkActor = "sign-in-link"
    /// The audit actor of a completed sign-in whose starter is not known (a row an older
    /// replica wrote before migration 0011).
    package static let unknownActor = "sign-in"

    package struct Started: Sendable {
        package let authorizeURL: String
        package let signInId: String
        /// Unix seconds.
        package let expiresAt: Int
    }

    package enum Completion: Sendable {
        /// The account, shown as a caller of `owner` sees it (the owner of the sign-in's
        /// external id; nil without one).
        case account(AccountRecord, owner: String?, created: Bool)
        case redirect(String, AccountRecord)

        package var account: AccountRecord {
            switch self {
            case .account(let account, _, _), .redirect(_, let account): account
            }
        }
    }

    /// Starts a sign-in.
    /// - Throws: `RelayError` 400 `invalid_request` (`redirect_after`, `claims`), 409 `conflict`
    ///   naming `external_id` when another account of its owner holds it already (to sign that
    ///   account in again, leave `external_id` out: it keeps it); `StoreError`.
    package func start(_ request: StartRequest) async throws -> Started {
        if let redirectAfter = request.redirectAfter {
            try checkRedirectAfter(redirectAfter)
        }
        if let externalId = request.externalId, try await store.holder(of: externalId) != nil {
            throw ExternalId.conflict()
        }
        let authority = request.authority ?? defaultAuthority
        let state = RandomToken.make(bytes: 32)
        let nonce = RandomToken.make(bytes: 16)
        let verifier = RandomToken.make(bytes: 32)  // 43 characters, RFC 7636 §4.1
        let challenge = Base64URL.encode(SHA256.hash(Array(verifier.utf8)))
        let signInId = request.signInId ?? "si_" + RandomToken.make(bytes: 16)
        let expiresAt = now() + Self.lifetimeSeconds
        let claims: String?
        do {
            claims = try ClaimsRequest.merged(claims: request.claims, capabilities: clientCapabilities)
        } catch {
            throw RelayError.invalidRequest(field: "claims", "'claims' must be a JSON object, as JSON text or base64.")
        }
        try await store.savePendingSignIn(
            PendingSignIn(
                signInId: signInId, authority: authority.url, scopes: request.scopes.canonical, nonce: nonce, codeVerifier: verifier,
                redirectAfter: request.redirectAfter, expiresAt: expiresAt, startedBy: request.startedBy, claims: claims,
                externalId: request.externalId, loginHint: request.loginHint, expectedHomeAccountId: request.expectedHomeAccountId,
                expectedAccountId: request.expectedAccountId),
            stateHash: SHA256.hash(Array(state.utf8)))

        var query: [(String, String)] = [
            ("client_id", clientId), ("response_type", "code"), ("redirect_uri", urls.redirectURI), ("response_mode", "query"),
            ("scope", request.scopes.wireValue), ("state", state), ("nonce", nonce),
            ("code_challenge", challenge), ("code_challenge_method", "S256"), ("client_info", "1"),
        ]
        if let hint = request.loginHint { query.append(("login_hint", hint)) }
        if let prompt = request.prompt { query.append(("prompt", prompt)) }
        if let claims { query.append(("claims", claims)) }
        return Started(authorizeURL: authority.authorizeEndpoint + "?" + FormEncoding.query(query), signInId: signInId, expiresAt: expiresAt)
    }

    /// Completes the sign-in the authority redirected back with.
    /// - Throws: `RelayError`: 400 `invalid_request` (unknown, used or expired state; missing code),
    ///   400 `user_canceled` (access_denied), 409 `interaction_required`, 409 `user_mismatch`
    ///   (another user than the one the sign-in is for, behaviour §3.8), 502 `upstream_error`
    ///   (bad id_token, STS error of our own making), 503 `upstream_unavailable` (the authority
    ///   unreachable; PostgreSQL unreachable until the deadline), 500 `internal` (a store failure).
    ///   Every problem after the state is used up, a store failure's too, is recorded as the
    ///   sign-in's outcome (§3.9).
    package func complete(query: [String: String], context: RequestContext) async throws -> Completion {
        let (stateHash, code) = try Self.callbackParameters(query)
        guard let pending = try await store.consumePendingSignIn(stateHash: stateHash, now: now()) else { throw Self.noPendingSignIn }
        do {
            return try await complete(pending, query: query, code: code, context: context)
        } catch let retryable as RedemptionNotMade {
            // The sign-in is pending again: the same callback may come back (its Retry-After).
            throw retryable.problem
        } catch {
            // A store failure is the sign-in's outcome too: its followers would otherwise read
            // `pending` until it expired (behaviour §3.9).
            var problem: RelayError
            switch error {
            case let relayError as RelayError: problem = relayError
            case let storeError as StoreError: problem = RelayError(storeError)
            default: throw error
            }
            // No account is involved until the callback succeeds: no `account_state`, as for app
            // and on-behalf-of grants (a refused code, AADSTS70000, said the account's died).
            problem.extensions["account_state"] = nil
            if problem.code == .interactionRequired || problem.code == .userMismatch { problem.signInHint = signInAgain(pending, after: problem) }
            problem.returnTo = pending.redirectAfter.flatMap { Self.location($0, adding: [("error", problem.code.rawValue)]) }
            await recordFailure(of: pending, problem, context: context)
            throw problem
        }
    }

    /// What `HEAD` on the callback answers (RFC 9110 §9.2.1: a safe method changes nothing): the
    /// checks of ``complete(query:context:)`` up to the sign-in, which is looked up and not taken,
    /// so a link checker or a prefetch leaves the user's own callback working (behaviour §3.2).
    /// - Throws: `RelayError` 400 `invalid_request` as ``complete(query:context:)`` does: no
    ///   `state` (field `state`), neither `code` nor `error` (field `code`), no pending sign-in
    ///   for the state (field `state`).
    package func checkCallback(query: [String: String]) async throws {
        let (stateHash, _) = try Self.callbackParameters(query)
        guard try await store.isSignInPending(stateHash: stateHash, now: now()) else { throw Self.noPendingSignIn }
    }

    /// The callback's `state` (as its hash) and `code` (empty when the authority answered an
    /// error), checked before the sign-in is looked up: a stray or truncated callback (no code, no
    /// error) must leave the user's real one working.
    private static func callbackParameters(_ query: [String: String]) throws(RelayError) -> (stateHash: [UInt8], code: String) {
        guard let state = query["state"], !state.isEmpty else {
            throw RelayError.invalidRequest(field: "state", "The callback carries no 'state'.")
        }
        let code = query["code"] ?? ""
        guard query["error"] != nil || !code.isEmpty else {
            throw RelayError.invalidRequest(field: "code", "The callback carries neither 'code' nor 'error'.")
        }
        return (SHA256.hash(Array(state.utf8)), code)
    }

    private static let noPendingSignIn = RelayError.invalidRequest(
        field: "state", "The sign-in is unknown, already completed, or expired; start a new one.")

    /// Records the failed outcome of `pending` (its `sign_in.failed` event; for a refused user
    /// the audit row) and wakes its followers. A store failure here is logged, not thrown: the
    /// caller's problem is the sign-in's, and its followers see it expire.
    private func recordFailure(of pending: PendingSignIn, _ problem: RelayError, context: RequestContext) async {
        var body: [String: JSONValue] = problem.extensions
        body["error"] = .string(problem.code.rawValue)
        body["status"] = .number(Double(problem.status))
        body["detail"] = .string(problem.detail)
        body["type"] = .string(problem.code.typeURI)
        body["title"] = .string(problem.code.title)
        let refusal = problem.code == .userMismatch ? (actor: pending.startedBy ?? Self.unknownActor, outcome: problem.code.rawValue) : nil
        do {
            try await store.failSignIn(signInId: pending.signInId, problem: .object(body), accountId: pending.expectedAccountId, refusal: refusal)
        } catch {
            logger.warn(
                "sign_in.outcome_not_recorded",
                ["sign_in.id": pending.signInId, "error": String(describing: error), "correlation.id": context.correlationId])
        }
    }

    /// The sign-in a callback's `interaction_required` sends the user to (behaviour §4.4): the
    /// same authority (nil for the default one), scopes, `login_hint` and `redirect_after`, and the
    /// claims the authorize request carried with any challenge the problem holds. Not the
    /// `prompt`: `none` is what may just have failed, so the authority decides.
    package func signInAgain(_ pending: PendingSignIn, after problem: RelayError) -> SignInHint {
        SignInHint(
            loginHint: pending.loginHint, scopes: pending.scopes, claims: SignInHint.claims(for: problem, requested: pending.claims),
            authority: pending.authority == defaultAuthority.url ? nil : pending.authority, prompt: nil, redirectAfter: pending.redirectAfter,
            homeAccountId: pending.expectedHomeAccountId)
    }

    /// The callback of `pending`, whose state is used up: the authority's error, or the code redeemed.
    private func complete(_ pending: PendingSignIn, query: [String: String], code: String, context: RequestContext) async throws -> Completion {
        if let error = query["error"] {
            throw Self.authorizeProblem(error: error, description: query["error_description"] ?? "")
        }
        let authority: Authority
        do {
            authority = try authorities.validate(pending.authority)
        } catch {
            // The configuration changed while the user was at the authority.
            throw RelayError(
                .invalidAuthority, "The sign-in's authority is no longer accepted (\(error.detail)); start a new sign-in.",
                extensions: ["field": .string("authority")])
        }
        let scopes = ScopeSet(normalizing: pending.scopes)
        // The redemption asks for what the authorize request asked (behaviour §1: every token request
        // carries the capabilities' xms_cc, merged with the challenge being satisfied; identity
        // platform "Claims challenges, claims requests, and client capabilities"), so the first
        // token a user gets is CAE-capable. A row from an older replica has none stored.
        let redemptionClaims = pending.claims ?? (try? ClaimsRequest.merged(claims: nil, capabilities: clientCapabilities)) ?? nil

        // The authority's signing keys, fetched (or found in memory) while the code is unspent:
        // fetched only after the redemption, a failure of theirs lost the user's tokens.
        do {
            _ = try await metadata.verifier(for: authority, keyId: nil)
        } catch let problem as RelayError {
            throw await releasing(pending, problem, context: context)
        }
        let response: TokenResponse
        do {
            response = try await sts.redeem(
                grant: [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", urls.redirectURI), ("code_verifier", pending.codeVerifier)],
                authority: authority, scopes: scopes, claims: redemptionClaims, context: context)
        } catch .rejected(let failure) {
            let problem = RelayError(failure, requestedScopes: scopes)
            guard failure.disposition == .throttled else { throw problem }
            throw await releasing(pending, problem, context: context)
        } catch .unavailable(let problem) {
            throw await releasing(pending, problem, context: context)
        }

        guard let idTokenText = response.idToken, let idToken = try? JWT.parse(idTokenText) else {
            throw RelayError(.upstreamError, "The token response has no readable id_token.", status: 502)
        }
        let (openID, verifier) = try await metadata.verifier(for: authority, keyId: idToken.keyId)
        let claims: IDTokenClaims
        do {
            claims = try IDTokenValidator(clientId: clientId).validate(
                idToken, expectedIssuer: openID.issuer, nonce: pending.nonce, now: now(), verifier: verifier)
        } catch {
            logger.warn("sign_in.id_token_rejected", ["reason": String(describing: error), "correlation.id": context.correlationId])
            throw RelayError(.upstreamError, "The id_token failed validation: \(error).", status: 502)
        }
        guard let clientInfoText = response.clientInfo, let clientInfo = try? ClientInfo.decode(clientInfoText) else {
            throw RelayError(.upstreamError, "The token response has no readable client_info; home_account_id cannot be known.", status: 502)
        }
        if let expected = pending.expectedHomeAccountId, !clientInfo.isUser(of: expected, b2c: authority.type == .b2c) {
            // Nothing of this user is kept: its tokens are dropped here, unstored (behaviour §3.8).
            throw try await userMismatch(pending)
        }

        let issuedAt = now()
        let realm = claims.tid ?? clientInfo.utid
        let granted = ScopeRules.granted(response.scope, requested: scopes)
        let accessToken = StoredAccessToken(
            response, accountId: "", environment: authority.environment, realm: realm, clientId: clientId, scopes: granted.canonical,
            issuedAt: issuedAt, obtainedBy: pending.startedBy ?? Self.unknownActor)
        let signedIn = SignedInAccount(
            environment: authority.environment, homeAccountId: clientInfo.homeAccountId, realm: realm, localAccountId: claims.oid,
            username: claims.username, name: claims.name, authority: authority, idTokenClaims: claims.publicJSON)
        let (account, created, assignment) = try await storeWhenReachable(pending, context: context) { [store] in
            try await store.saveSignIn(
                signedIn, refreshToken: response.refreshToken, familyId: response.foci, accessToken: accessToken,
                actor: pending.startedBy ?? Self.unknownActor, externalId: pending.externalId, signInId: pending.signInId)
        }
        forgetInMemory(account.accountId)
        if assignment == .heldByAnother {
            // Another account of the owner took the external id while the user was at the
            // authority: the sign-in stands, the account keeps what it had (behaviour §3.7).
            logger.warn(
                "sign_in.external_id_conflict",
                ["account.id": account.accountId, "sign_in.id": pending.signInId, "correlation.id": context.correlationId])
        }
        // The username is masked unless TOKENRELAY_LOG_PII is on (the logger decides, behaviour §7).
        logger.info(
            "sign_in.completed",
            [
                "account.id": account.accountId, "account.username": account.username ?? "", "sign_in.id": pending.signInId,
                "correlation.id": context.correlationId,
            ])

        if let redirectAfter = pending.redirectAfter {
            guard let location = Self.location(redirectAfter, accountId: account.accountId) else {
                // Checked at the start; only a sign-in stored before that check can get here.
                logger.warn("sign_in.redirect_after_unusable", ["sign_in.id": pending.signInId, "correlation.id": context.correlationId])
                return .account(account, owner: pending.externalId?.owner, created: created)
            }
            return .redirect(location, account)
        }
        return .account(account, owner: pending.externalId?.owner, created: created)
    }

    /// A redemption the authority did not make (it could not be reached, asked to wait, or its
    /// signing keys could not be had first): the
    /// code is still good, so the sign-in goes back to `pending` and the same callback may be
    /// sent again, as the problem's `Retry-After` says; a 503 whose state was used up could not
    /// be retried, and the person had to sign in again (behaviour §3.2). Should the code have
    /// reached the authority after all (an answer lost), the retry is refused as the code's
    /// reuse, no worse than before. When the release fails, the problem is the sign-in's outcome.
    private func releasing(_ pending: PendingSignIn, _ problem: RelayError, context: RequestContext) async -> any Error {
        do {
            if try await store.releasePendingSignIn(pending) {
                logger.info("sign_in.released", ["sign_in.id": pending.signInId, "correlation.id": context.correlationId])
                return RedemptionNotMade(problem: problem)
            }
        } catch {
            logger.warn(
                "sign_in.release_failed", ["sign_in.id": pending.signInId, "error": String(describing: error), "correlation.id": context.correlationId])
        }
        return problem
    }

    /// Seconds between attempts of ``storeWhenReachable(_:context:_:)``.
    package static let storeRetryPauseSeconds = 0.5

    /// Runs `save`, the sign-in's one transaction, again while PostgreSQL is unreachable, until
    /// the request's deadline (behaviour §3.2, §5.8). By now the code is redeemed and its tokens
    /// exist only in this request: a callback answered 503 cannot be retried (its state is used
    /// up), so a short outage (a restart, a failover) cost the user the sign-in. Running the
    /// transaction twice is safe, also after a COMMIT whose answer was lost: it upserts the
    /// account by `home_account_id`. No connection is held while waiting.
    private func storeWhenReachable<T: Sendable>(
        _ pending: PendingSignIn, context: RequestContext, _ save: @Sendable () async throws -> T
    ) async throws -> T {
        var attempts = 0
        while true {
            do {
                let saved = try await save()
                if attempts > 0 {
                    logger.info(
                        "sign_in.stored_on_retry",
                        ["sign_in.id": pending.signInId, "attempts": String(attempts + 1), "correlation.id": context.correlationId])
                }
                return saved
            } catch let error as StoreError where error.code == .unavailable && context.remainingSeconds > Self.storeRetryPauseSeconds {
                if attempts == 0 {
                    logger.warn("sign_in.store_waiting", ["sign_in.id": pending.signInId, "correlation.id": context.correlationId])
                }
                attempts += 1
                try await Task.sleep(for: .seconds(Self.storeRetryPauseSeconds))
            }
        }
    }

    /// 409 `user_mismatch` naming the account the sign-in was for (behaviour §3.8; MSAL for iOS
    /// and macOS, `MSALErrorMismatchedUser`).
    private func userMismatch(_ pending: PendingSignIn) async throws -> RelayError {
        var expected: AccountRecord?
        if let accountId = pending.expectedAccountId { expected = try await store.account(id: accountId) }
        var extensions: [String: JSONValue] = [:]
        extensions["account_id"] = pending.expectedAccountId.map(JSONValue.string)
        extensions["username"] = (expected?.username ?? pending.loginHint).map(JSONValue.string)
        let who = expected?.username ?? pending.loginHint ?? "another account"
        return RelayError(.userMismatch, "This sign-in is for \(who); another user signed in. Sign in again as \(who).", extensions: extensions)
    }

    /// The longest `wait` of `GET /v1/sign-ins/{sign_in_id}` (seconds, behaviour §3.9).
    package static let longestWait = 60

    /// Where sign-in `id` stands, answered when its status is no longer `pending` or `seconds`
    /// passed (behaviour §3.9). No database connection is held while waiting: the
    /// `sign_in.finished` notification of whichever replica ran the callback wakes the wait
    /// (``followers``), which then reads the sign-in again; while notifications do not flow it
    /// reads it every second.
    /// - Parameters:
    ///   - reader: the caller's API key id: the key that started the sign-in (or was handed its
    ///     link) may read it.
    ///   - readsAccounts: whether the caller has `accounts:read` (may read any sign-in).
    /// - Throws: 404 `not_found` for an unknown id, or one the caller may not read (not told
    ///   apart); `StoreError`.
    package func follow(_ id: String, waitSeconds seconds: Int, reader: String?, readsAccounts: Bool) async throws -> SignInOutcome {
        let ticket = followers.follow(id)
        defer { ticket.end() }
        let deadline = ContinuousClock.now.advanced(by: .seconds(seconds))
        while true {
            let outcome = try await outcome(of: id, reader: reader, readsAccounts: readsAccounts)
            let left = ContinuousClock.now.duration(to: deadline)
            guard outcome.status == .pending, left > .zero, !followers.isStopping else { return outcome }
            let leftSeconds = Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18
            await ticket.wait(seconds: notificationsFlow() ? leftSeconds : min(leftSeconds, 1))
        }
    }

    /// One read of sign-in `id` (see ``follow(_:waitSeconds:reader:readsAccounts:)``). A link's
    /// sign-in that nobody started yet has no row: its id vouches for it (``SignInStartLinks``).
    private func outcome(of id: String, reader: String?, readsAccounts: Bool) async throws -> SignInOutcome {
        let link = links?.linkSignInId(id, reader: reader)
        let unknown = RelayError(
            .notFound, "No sign-in with this id is known to this key; a sign-in is kept until an hour after it expires.",
            extensions: ["field": .string("sign_in_id")])
        let current = now()
        if let stored = try await store.signInOutcome(id: id, now: current) {
            guard readsAccounts || (reader != nil && stored.startedBy == reader) || link?.isReader == true else { throw unknown }
            return stored
        }
        guard let link, readsAccounts || link.isReader else { throw unknown }
        return SignInOutcome(signInId: id, status: link.expires > current ? .pending : .expired, expiresAt: link.expires, startedBy: nil)
    }

    /// `redirect_after` with `account_id` added to its query (joined by `&` when it has one,
    /// before any fragment), built with `URLComponents` rather than by concatenation.
    package static func location(_ redirectAfter: String, accountId: String) -> String? {
        location(redirectAfter, adding: [("account_id", accountId)])
    }

    /// `redirect_after` with `parameters` added to its query (`account_id`; `error` for the
    /// failed sign-in page's way back, ``RelayError/returnTo``).
    package static func location(_ redirectAfter: String, adding parameters: [(String, String)]) -> String? {
        guard RedirectAfter.isWellFormed(redirectAfter), var components = URLComponents(string: redirectAfter) else { return nil }
        let added = FormEncoding.query(parameters)
        if let query = components.percentEncodedQuery, !query.isEmpty {
            components.percentEncodedQuery = query + "&" + added
        } else {
            components.percentEncodedQuery = added
        }
        return components.string
    }

    /// `redirect_after` must be a well-formed absolute http(s) URL (RFC 3986 §4.3: only its
    /// characters, no control character, space or raw non-ASCII) on an allowed origin: no open
    /// redirect, and nothing the callback's `Location` header could not carry.
    package func checkRedirectAfter(_ url: String) throws {
        guard RedirectAfter.isWellFormed(url), let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            ["http", "https"].contains(scheme), let host = components.host?.lowercased(), !host.isEmpty
        else {
            throw RelayError.invalidRequest(
                field: "redirect_after",
                "'redirect_after' must be an absolute http(s) URL of RFC 3986 characters only (percent-encode spaces, control and non-ASCII characters).")
        }
        // Userinfo (`https://evil.example@app.contoso.com/`) reads to a person as another host
        // (RFC 3986 §7.6; RFC 9110 §4.2.4 forbids it in http(s) URIs).
        guard components.percentEncodedUser == nil, components.percentEncodedPassword == nil,
            !Self.authority(of: url).contains("@")
        else {
            throw RelayError.invalidRequest(field: "redirect_after", "'redirect_after' may not hold userinfo ('user@' before the host).")
        }
        // The callback adds the account's own `account_id`: one the URL already holds would come
        // first and be the one an application reads.
        guard !(components.percentEncodedQueryItems ?? []).contains(where: { $0.name.removingPercentEncoding == "account_id" || $0.name == "account_id" })
        else {
            throw RelayError.invalidRequest(field: "redirect_after", "'redirect_after' may not hold an account_id parameter; the callback adds it.")
        }
        let origin = "\(scheme)://\(host)" + (components.port.map { ":\($0)" } ?? "")
        guard redirectAfterOrigins.contains(where: { $0.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "/")) == origin }) else {
            throw RelayError.invalidRequest(field: "redirect_after", "'redirect_after' is not on an allowed origin (TOKENRELAY_REDIRECT_AFTER_ORIGINS).")
        }
    }

    /// The authority part of an absolute URI (RFC 3986 §3.2): what lies between `//` and the next
    /// `/`, `?` or `#`; empty when there is none.
    package static func authority(of url: String) -> Substring {
        guard let start = url.range(of: "//") else { return "" }
        return url[start.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
    }

    /// An error the authority sent to the redirect URI (RFC 6749 §4.1.2.1).
    package static func authorizeProblem(error: String, description: String) -> RelayError {
        // The browser brings these, not the authority. Every code RFC 6749 §4.1.2.1, OpenID
        // Connect Core §3.1.2.6 and the identity platform send is a word of letters, digits and
        // '_'; anything else (`<script>`) was a 502 echoing what the URL held.
        guard !error.isEmpty, error.utf8.count <= 64, error.utf8.allSatisfy({ $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "_") }) else {
            return RelayError.invalidRequest(field: "error", "The callback's 'error' is not an error code of the authorization protocol.")
        }
        // The redirect carries the same fields as a token-endpoint error body: one parser and one
        // table read both (behaviour §4.3). No headers, so no Retry-After date to read the time for.
        let failure = STSErrorMapping.classify(
            status: 400, headers: [], body: JSONWriter.encode(.object(["error": .string(error), "error_description": .string(description)])),
            now: .distantPast)
        let codes = failure.stsErrorCodes
        var extensions: [String: JSONValue] = [:]
        if !codes.isEmpty { extensions["sts_error_codes"] = .array(codes.map { .number(Double($0)) }) }
        switch error {
        case "access_denied":
            return RelayError(.userCanceled, "The user declined at the authority.", extensions: extensions)
        case "interaction_required", "login_required", "consent_required":
            extensions["suberror"] = error == "consent_required" ? .string("consent_required") : nil
            return RelayError(.interactionRequired, "The authority needs the user's interaction: \(error).", extensions: extensions)
        default:
            // The scopes or authority the sign-in asked for, refused (AADSTS70011, 90002,
            // `invalid_scope`, ...): a 400 `invalid_scope` / `invalid_authority` whose field the
            // renderer names (the sign-in's `scopes` or `authority`), not a 502 that calls it the
            // service's own fault.
            if failure.disposition == .badRequest, failure.problem == .invalidScope || failure.problem == .invalidAuthority {
                let member = failure.problem == .invalidScope ? "scopes" : "authority"
                return RelayError(
                    failure.problem, "The authority refused the sign-in's \(member): \(error).", status: 400, extensions: extensions)
            }
            return RelayError(.upstreamError, "The authority answered '\(error)'.", status: 502, extensions: extensions)
        }
    }
}

/// The callback's problem when its sign-in went back to `pending` (``SignInService/releasing(_:_:context:)``):
/// not the sign-in's outcome.
private struct RedemptionNotMade: Error {
    let problem: RelayError
}
