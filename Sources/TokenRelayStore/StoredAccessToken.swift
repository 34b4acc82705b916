import IdentityCore
import TokenRelayBase

/// An access-token cache entry (behaviour §1): keyed by (account, environment, realm, client_id,
/// target scope set), decrypted for use in this process only.
package struct StoredAccessToken: Sendable, Equatable {
    package let accountId: String
    package let environment: String
    package let realm: String
    package let clientId: String
    /// Granted scopes in canonical form.
    package let scopes: [String]
    package let secret: String
    /// Unix seconds.
    package let expiresOn: Int
    package let extExpiresOn: Int?
    package let refreshOn: Int?
    /// The token's `uti` claim (``AccessTokenIdentifier``), read once here so a cached answer
    /// counts its receipt without parsing the token; nil for an opaque token.
    package let uti: String?
    /// The API key id of the request that made the service obtain this token (behaviour §12
    /// Audit: token provenance), `sign-in-link`/`import` as the audit actors name them, nil for
    /// background work or a token read back from the store. Only the store's write reads it.
    package var obtainedBy: String?

    package init(
        accountId: String, environment: String, realm: String, clientId: String, scopes: [String], secret: String, expiresOn: Int, extExpiresOn: Int?,
        refreshOn: Int?, obtainedBy: String? = nil
    ) {
        self.accountId = accountId
        self.environment = environment
        self.realm = realm
        self.clientId = clientId
        self.scopes = scopes
        self.secret = secret
        self.expiresOn = expiresOn
        self.extExpiresOn = extExpiresOn
        self.refreshOn = refreshOn
        self.uti = AccessTokenIdentifier.uti(of: secret)
        self.obtainedBy = obtainedBy
    }

    /// The same token whoever obtained it (``obtainedBy`` is where it came from, not what it is).
    package static func == (lhs: StoredAccessToken, rhs: StoredAccessToken) -> Bool {
        lhs.accountId == rhs.accountId && lhs.environment == rhs.environment && lhs.realm == rhs.realm && lhs.clientId == rhs.clientId
            && lhs.scopes == rhs.scopes && lhs.secret == rhs.secret && lhs.expiresOn == rhs.expiresOn && lhs.extExpiresOn == rhs.extExpiresOn
            && lhs.refreshOn == rhs.refreshOn
    }

    package var times: CachedTokenTimes { CachedTokenTimes(expiresOn: expiresOn, extExpiresOn: extExpiresOn, refreshOn: refreshOn) }

    package var scopeSet: ScopeSet { ScopeSet(normalizing: scopes) }
}

extension StoredAccessToken {
    /// The cache entry for the access token in `response`, its lifetimes counted from `issuedAt`.
    /// - Parameters:
    ///   - scopes: the granted scopes, canonical.
    ///   - issuedAt: unix seconds when the response arrived; `expires_in`, `ext_expires_in` and
    ///     `refresh_in` are seconds from then.
    ///   - obtainedBy: the API key id of the request that caused the call (``obtainedBy``).
    package init(
        _ response: TokenResponse, accountId: String, environment: String, realm: String, clientId: String, scopes: [String], issuedAt: Int,
        obtainedBy: String?
    ) {
        self.init(
            accountId: accountId, environment: environment, realm: realm, clientId: clientId, scopes: scopes, secret: response.accessToken,
            expiresOn: issuedAt + response.expiresIn, extExpiresOn: response.extExpiresIn.map { issuedAt + $0 },
            refreshOn: response.refreshIn.map { issuedAt + $0 }, obtainedBy: obtainedBy)
    }
}

extension StoredAccessToken {
    /// Served iff `expires_on − now ≥ max(expiry_skew, min_ttl)` (behaviour §12); all in seconds.
    package func isServable(now: Int, expirySkew: Int, minTTL: Int) -> Bool {
        switch TokenFreshness.evaluate(times, now: now, expirySkew: expirySkew, minTTL: minTTL) {
        case .fresh, .refreshDue: return true
        case .expired, .extendedOnly: return false
        }
    }
}

extension Sequence<StoredAccessToken> {
    /// The longest-lived servable token covering `scopes`; with `acceptRefreshDue` false, only
    /// one whose `refresh_on` has not passed. Times in seconds.
    package func best(covering scopes: ScopeSet, now: Int, expirySkew: Int, minTTL: Int, acceptRefreshDue: Bool = true) -> StoredAccessToken? {
        filter { token in
            guard token.scopeSet.isSuperset(of: scopes) else { return false }
            let freshness = TokenFreshness.evaluate(token.times, now: now, expirySkew: expirySkew, minTTL: minTTL)
            return freshness == .fresh || (acceptRefreshDue && freshness == .refreshDue)
        }.max { $0.expiresOn < $1.expiresOn }
    }
}
