import IdentityCore
import TokenRelayBase

/// What the refresh engine needs of PostgreSQL (ADR 0012): each call is one short statement or
/// transaction, and none is open while the STS answers. `TokenStore` is the live form; tests
/// give the executor another.
package protocol RefreshTokenStore: Sendable {
    /// Claims the redemption lease of the account's refresh token for `leaseSeconds`.
    /// - Throws: `RelayError` 503 when the database is unreachable; 500 when the stored token cannot
    ///   be decrypted (the lease is released first).
    func claimRefresh(_ claim: RefreshClaimRequest) async throws -> RefreshClaim

    /// Stores the STS answer fenced on the generation redeemed, releasing the lease.
    /// - Throws: `RelayError` 503 when the database is unreachable; 500 for a statement that failed.
    func writeRotation(_ write: RotationWrite) async throws -> RotationWriteOutcome

    /// Releases the lease if `owner` still holds it, and wakes waiters on every replica.
    func releaseRefreshLease(accountId: String, owner: String) async throws

    /// Extends the lease `owner` holds to `leaseSeconds` from now (PostgreSQL's clock): the
    /// holder's keep-alive while its token-endpoint call runs (ADR 0012).
    /// - Returns: false when `owner` no longer holds it (it ran out and was taken over, or was released).
    /// - Throws: `RelayError` 503 when the database is unreachable.
    func renewRefreshLease(accountId: String, owner: String, leaseSeconds: Double) async throws -> Bool

    /// Deletes the refresh token if it is still at `generation` and puts the account in
    /// `interaction_required` (behaviour §2.2). Returns whether it did.
    func markRefreshTokenDead(accountId: String, generation: Int64, stsErrorCodes: [Int]) async throws -> Bool

    /// The account's stored access tokens in `realm` (undecryptable rows are left out).
    func accessTokens(accountId: String, environment: String, realm: String) async throws -> [StoredAccessToken]

    /// Records the account's failed refresh for its health (behaviour §3.8); best effort.
    func recordFailure(accountId: String, _ failure: AccountFailure) async throws
}

extension RefreshTokenStore {
    /// Stores that keep no health (tests' outage stores) record nothing.
    package func recordFailure(accountId: String, _ failure: AccountFailure) async throws {}
}

/// One claim: whose lease, for how long, and which stored access token would make it unneeded.
package struct RefreshClaimRequest: Sendable {
    package let accountId: String
    package let environment: String
    package let realm: String
    package let scopes: ScopeSet
    /// Look for a usable stored access token first (not for `force_refresh` or claims).
    package let checkCache: Bool
    /// With `checkCache`: whether a token past `refresh_on` counts (not for proactive refresh).
    package let acceptRefreshDue: Bool
    /// Unix seconds: a stored token counts only if `expires_on` is at least this
    /// (`now + max(expiry_skew, min_ttl_s)`, behaviour §12).
    package let minimumExpiresOn: Int
    /// Unix seconds.
    package let now: Int
    /// This claim's unique lease owner (replica origin and a random part).
    package let owner: String
    /// How long the lease holds unless renewed, seconds (`TOKENRELAY_REFRESH_LEASE_S`).
    package let leaseSeconds: Double

    package init(
        accountId: String, environment: String, realm: String, scopes: ScopeSet, checkCache: Bool, acceptRefreshDue: Bool, minimumExpiresOn: Int, now: Int,
        owner: String, leaseSeconds: Double
    ) {
        self.accountId = accountId
        self.environment = environment
        self.realm = realm
        self.scopes = scopes
        self.checkCache = checkCache
        self.acceptRefreshDue = acceptRefreshDue
        self.minimumExpiresOn = minimumExpiresOn
        self.now = now
        self.owner = owner
        self.leaseSeconds = leaseSeconds
    }
}

/// What a claim found.
package enum RefreshClaim: Sendable, Equatable {
    /// The lease is this claim's: redeem `token`, of `generation`. `takenOverFrom`: the owner of
    /// a lease that ran out and this claim replaced (its holder died or could not renew it); nil
    /// when the lease was free.
    case claimed(token: String, generation: Int64, takenOverFrom: String?)
    /// Another redemption holds the lease for about `secondsLeft` more.
    case heldElsewhere(secondsLeft: Double)
    /// A usable access token is stored (another redemption finished meanwhile).
    case freshTokenStored
    /// The account has no refresh token.
    case noRefreshToken
}

extension RefreshClaim {
    /// `tokenrelay_refresh_claims_total{result}`.
    package var metricLabel: String {
        switch self {
        case .claimed(_, _, let takenOverFrom): takenOverFrom == nil ? "claimed" : "taken_over"
        case .heldElsewhere: "held_elsewhere"
        case .freshTokenStored: "fresh_token_stored"
        case .noRefreshToken: "no_refresh_token"
        }
    }
}

/// The fenced write of one redemption's answer.
package struct RotationWrite: Sendable {
    package let accountId: String
    /// The account's tenant (its `realm`), whose data key seals the refresh token (ADR 0017).
    package let tenantId: String
    /// The generation redeemed: the row changes only while it is still this one.
    package let generation: Int64
    /// The new refresh token, nil when the STS returned none (the stored one stays, case 14).
    package let rotatedRefreshToken: String?
    package let familyId: String?
    /// ``TokenStore/lineageDigest(_:)`` of the refresh token that was redeemed.
    package let redeemedFingerprint: String
    /// The access token to cache with it; nil writes the refresh token alone.
    package let accessToken: StoredAccessToken?
    /// `accessToken`'s scopes as the set they were made from, when the writer has it (a refresh's
    /// granted set); nil: the store normalises `accessToken.scopes` (the same set, made again).
    package let accessTokenScopes: ScopeSet?
    /// A claims challenge was met: other replicas drop the account's in-memory access tokens.
    package let notifyAccessTokensReplaced: Bool

    package init(
        accountId: String, tenantId: String, generation: Int64, rotatedRefreshToken: String?, familyId: String?, redeemedFingerprint: String,
        accessToken: StoredAccessToken?, accessTokenScopes: ScopeSet? = nil, notifyAccessTokensReplaced: Bool
    ) {
        self.accountId = accountId
        self.tenantId = tenantId
        self.generation = generation
        self.rotatedRefreshToken = rotatedRefreshToken
        self.familyId = familyId
        self.redeemedFingerprint = redeemedFingerprint
        self.accessToken = accessToken
        assert(accessTokenScopes.map { $0.canonical == accessToken?.scopes } ?? true, "the scope set is not the access token's")
        self.accessTokenScopes = accessToken == nil ? nil : accessTokenScopes
        self.notifyAccessTokensReplaced = notifyAccessTokensReplaced
    }
}

extension RotationWrite {
    /// The write of the STS answer `response` to a redemption of `redeemed` (the refresh token of
    /// `generation`); an empty `refresh_token` counts as none (case 14: never store a null over one).
    package init(
        _ response: TokenResponse, accountId: String, tenantId: String, generation: Int64, redeemed: String, accessToken: StoredAccessToken?,
        accessTokenScopes: ScopeSet? = nil, notifyAccessTokensReplaced: Bool
    ) {
        self.init(
            accountId: accountId, tenantId: tenantId, generation: generation, rotatedRefreshToken: response.refreshToken.flatMap { $0.isEmpty ? nil : $0 },
            familyId: response.foci, redeemedFingerprint: TokenStore.lineageDigest(redeemed), accessToken: accessToken,
            accessTokenScopes: accessTokenScopes, notifyAccessTokensReplaced: notifyAccessTokensReplaced)
    }
}

/// How the fenced write ended.
package enum RotationWriteOutcome: Sendable, Equatable {
    /// Stored; the row is now at `generation`.
    case stored(generation: Int64)
    /// An earlier attempt of this same write committed (its answer was lost with the connection).
    case alreadyStored
    /// The row is at another generation (a sign-in, or a redemption after a lease takeover) or gone.
    case fencedOut
}
