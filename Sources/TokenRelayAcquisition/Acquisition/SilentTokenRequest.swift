import IdentityCore
import TokenRelayBase
import TokenRelayStore
import TokenRelayUpstream

/// A `POST /v1/tokens/silent` request after validation (behaviour §2, §12 Token requests).
///
/// Its members live in one shared, immutable object: a request is copied into the body memo, the
/// plan and the result's steps of every cached answer, and a copy is then one reference count
/// instead of one per string and set (behaviour §10). A change (rare: an external id resolved,
/// a downstream claims challenge) makes a new object.
package struct SilentTokenRequest: Sendable {
    package enum AccountSelector: Sendable, Equatable {
        case accountId(String)
        case homeAccountId(String)
        case username(String, tenantId: String?)

        /// The request member that gave it, named by a 404 `account_not_found`.
        package var member: String {
            switch self {
            case .accountId: "account_id"
            case .homeAccountId: "home_account_id"
            case .username: "username"
            }
        }
    }

    private struct Members: Sendable {
        var account: AccountSelector
        var scopes: ScopeSet
        var authority: Authority?
        var claims: String?
        var forceRefresh: Bool
        var minTTLSeconds: Int
        var allowPartial: Bool
        var inputFields: RelayError.InputFields
    }

    private final class Storage: Sendable {
        let members: Members
        /// ``SilentTokenRequest/bypassesCache``, worked out once: the plan asks it at every step,
        /// and `claims` are parsed to answer it.
        let bypassesCache: Bool
        /// ``SilentTokenRequest/mayNameExternalId``, worked out once.
        let mayNameExternalId: Bool
        init(_ members: Members) {
            self.members = members
            bypassesCache = members.forceRefresh || ClaimsRequest.bypassesCache(claims: members.claims)
            if case .accountId(let value) = members.account { mayNameExternalId = !ExternalId.looksLikeAccountId(value) } else { mayNameExternalId = false }
        }
    }

    private var storage: Storage

    private mutating func change(_ body: (inout Members) -> Void) {
        var members = storage.members
        body(&members)
        storage = Storage(members)
    }

    package var account: AccountSelector {
        get { storage.members.account }
        set { change { $0.account = newValue } }
    }
    package var scopes: ScopeSet {
        get { storage.members.scopes }
        set { change { $0.scopes = newValue } }
    }
    /// An authority other than the account's own (must be valid and known).
    package var authority: Authority? {
        get { storage.members.authority }
        set { change { $0.authority = newValue } }
    }
    /// The caller's claims request (JSON text), before capabilities are merged.
    package var claims: String? {
        get { storage.members.claims }
        set { change { $0.claims = newValue } }
    }
    package var forceRefresh: Bool {
        get { storage.members.forceRefresh }
        set { change { $0.forceRefresh = newValue } }
    }
    /// Seconds the token must still be valid for; 0 = only the expiry skew applies.
    package var minTTLSeconds: Int {
        get { storage.members.minTTLSeconds }
        set { change { $0.minTTLSeconds = newValue } }
    }
    package var allowPartial: Bool {
        get { storage.members.allowPartial }
        set { change { $0.allowPartial = newValue } }
    }
    /// The members the body chose the scopes and authority with, named by the STS's input
    /// refusals (behaviour §4.1, §4.3).
    package var inputFields: RelayError.InputFields {
        get { storage.members.inputFields }
        set { change { $0.inputFields = newValue } }
    }

    package init(
        account: AccountSelector, scopes: ScopeSet, authority: Authority? = nil, claims: String? = nil, forceRefresh: Bool = false, minTTLSeconds: Int = 0,
        allowPartial: Bool = false, inputFields: RelayError.InputFields = RelayError.InputFields()
    ) {
        storage = Storage(
            Members(
                account: account, scopes: scopes, authority: authority, claims: claims, forceRefresh: forceRefresh, minTTLSeconds: minTTLSeconds,
                allowPartial: allowPartial, inputFields: inputFields))
    }

    /// Whether the access-token cache is skipped: `force_refresh`, or claims that are more than
    /// capabilities (behaviour §1.7, §2.2 step 5).
    package var bypassesCache: Bool { storage.bypassesCache }

    /// Whether `account_id` may be an external id of the caller's (behaviour §3.7): a value not
    /// shaped like an account id (``ExternalId/looksLikeAccountId(_:)``). The usual request names
    /// an account id and asks memory for no external id.
    package var mayNameExternalId: Bool { storage.mayNameExternalId }
}

/// A token handed to the caller (never a refresh token).
package struct SilentTokenResult: Sendable {
    package enum Source: String, Sendable {
        case cache
        case refresh
        case identityProvider = "identity_provider"
    }

    package let token: StoredAccessToken
    package let account: AccountRecord
    package let source: Source
    package let declinedScopes: [String]
    /// Served past `expires_on` under the extended lifetime while the STS was unavailable (behaviour §5).
    package var extendedLifetime = false
    /// The answer's bytes memory made for `token` (`source: cache` only).
    package var prebuiltAnswer: TokenAnswerBytes?

    package init(
        token: StoredAccessToken, account: AccountRecord, source: Source, declinedScopes: [String], extendedLifetime: Bool = false,
        prebuiltAnswer: TokenAnswerBytes? = nil
    ) {
        self.token = token
        self.account = account
        self.source = source
        self.declinedScopes = declinedScopes
        self.extendedLifetime = extendedLifetime
        self.prebuiltAnswer = prebuiltAnswer
    }
}

extension KeyAccess {
    /// 403 `forbidden` for what a token request names and the key may not use: a `tenant_id`,
    /// an authority's tenant, a scope outside the patterns.
    package func check(_ request: SilentTokenRequest) throws(RelayError) {
        if !limitsTenants && !limitsScopes { return }
        if case .username(_, let tenantId?) = request.account { try check(tenant: tenantId, field: "tenant_id") }
        if let authority = request.authority { try check(authority: authority) }
        try check(request.scopes, field: "scopes")
    }
}
