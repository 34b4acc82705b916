import IdentityCore

/// An access-token cache entry (SPEC §1): keyed by (account, environment, realm, client_id,
/// target scope set), decrypted for use in this process only.
struct StoredAccessToken: Sendable, Equatable {
    let accountId: String
    let environment: String
    let realm: String
    let clientId: String
    /// Granted scopes in canonical form.
    let scopes: [String]
    let secret: String
    /// Unix seconds.
    let expiresOn: Int
    let extExpiresOn: Int?
    let refreshOn: Int?

    var times: CachedTokenTimes { CachedTokenTimes(expiresOn: expiresOn, extExpiresOn: extExpiresOn, refreshOn: refreshOn) }

    var scopeSet: ScopeSet { ScopeSet(normalizing: scopes) }
}
