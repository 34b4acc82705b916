import IdentityCore

/// A `POST /v1/tokens/silent` request after validation (behaviour §2, §12 Token requests).
struct SilentTokenRequest: Sendable {
    enum AccountSelector: Sendable, Equatable {
        case accountId(String)
        case homeAccountId(String)
        case username(String, tenantId: String?)
    }

    var account: AccountSelector
    var scopes: ScopeSet
    /// An authority other than the account's own (must be valid and known).
    var authority: Authority?
    /// The caller's claims request (JSON text), before capabilities are merged.
    var claims: String?
    var forceRefresh: Bool = false
    /// Seconds the token must still be valid for; 0 = only the expiry skew applies.
    var minTTLSeconds: Int = 0
    var allowPartial: Bool = false
    /// The members the body chose the scopes and authority with, named by the STS's input
    /// refusals (behaviour §4.1, §4.3).
    var inputFields = Problem.InputFields()

    /// Whether the access-token cache is skipped: `force_refresh`, or claims that are more than
    /// capabilities (behaviour §1.7, §2.2 step 5).
    var bypassesCache: Bool { forceRefresh || ClaimsRequest.bypassesCache(claims: claims) }
}

/// A token handed to the caller (never a refresh token).
struct SilentTokenResult: Sendable {
    enum Source: String, Sendable {
        case cache
        case refresh
        case identityProvider = "identity_provider"
    }

    let token: StoredAccessToken
    let account: AccountRecord
    let source: Source
    let declinedScopes: [String]
    /// Served past `expires_on` under the extended lifetime while the STS was unavailable (behaviour §5).
    var extendedLifetime = false
    /// The answer's bytes memory made for `token` (`source: cache` only).
    var prebuiltAnswer: TokenAnswerBytes?
}
