import Foundation
import IdentityCore

/// One signed-in user for this client (behaviour §1, §3) as stored.
struct AccountRecord: Sendable, Equatable {
    enum State: String, Sendable {
        case active
        case interactionRequired = "interaction_required"
    }

    let accountId: String
    let clientId: String
    let environment: String
    let homeAccountId: String?
    let realm: String
    let localAccountId: String?
    let username: String?
    let name: String?
    let authority: String
    let authorityType: AuthorityType
    let state: State
    let idTokenClaims: String
    let createdAt: String
    let lastUsedAt: String?
    /// Every tenant the user signed into (behaviour §12 Accounts: a guest is one account with several
    /// profiles); empty for an import not yet redeemed.
    let tenantProfiles: [TenantProfile]
    /// `idTokenClaims` parsed once here rather than on every answer that shows the account.
    let claims: JSONValue
    /// `json` encoded once: the account part of every cached token answer (behaviour §10).
    private(set) var jsonBytes: [UInt8] = []

    init(
        accountId: String, clientId: String, environment: String, homeAccountId: String?, realm: String, localAccountId: String?,
        username: String?, name: String?, authority: String, authorityType: AuthorityType, state: State, idTokenClaims: String,
        createdAt: String, lastUsedAt: String?, tenantProfiles: [TenantProfile]? = nil
    ) {
        self.accountId = accountId
        self.clientId = clientId
        self.environment = environment
        self.homeAccountId = homeAccountId
        self.realm = realm
        self.localAccountId = localAccountId
        self.username = username
        self.name = name
        self.authority = authority
        self.authorityType = authorityType
        self.state = state
        self.idTokenClaims = idTokenClaims
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.tenantProfiles =
            tenantProfiles
            ?? (homeAccountId == nil
                ? [] : [TenantProfile(realm: realm, localAccountId: localAccountId, isHome: homeAccountId?.hasSuffix("." + realm) ?? true)])
        self.claims = JSONValue.parse(idTokenClaims) ?? .object([:])
        jsonBytes = JSONWriter.encode(json)
    }

    /// The account object of the API (behaviour §3, §12 Accounts).
    var json: JSONValue {
        .object([
            "account_id": .string(accountId),
            "home_account_id": homeAccountId.map(JSONValue.string) ?? .null,
            "environment": .string(environment),
            "realm": .string(realm),
            "local_account_id": localAccountId.map(JSONValue.string) ?? .null,
            "username": username.map(JSONValue.string) ?? .null,
            "name": name.map(JSONValue.string) ?? .null,
            "authority_type": .string(authorityType.rawValue),
            "state": .string(state.rawValue),
            "created_at": .string(createdAt),
            "last_used_at": lastUsedAt.map(JSONValue.string) ?? .null,
            "id_token_claims": claims,
            "tenant_profiles": .array(tenantProfiles.map(\.json)),
        ])
    }

    /// True when the account (or one of its guest profiles) is in `tenantId` (case-insensitive).
    func isIn(tenant tenantId: String) -> Bool {
        realm.caseInsensitiveCompare(tenantId) == .orderedSame
            || tenantProfiles.contains { $0.realm.caseInsensitiveCompare(tenantId) == .orderedSame }
    }
}

/// One tenant an account signed into: `{realm, local_account_id, is_home}` (behaviour §12 Accounts).
struct TenantProfile: Sendable, Equatable {
    let realm: String
    /// The user's `oid` in that tenant.
    let localAccountId: String?
    /// Whether `realm` is the home tenant (the `utid` of `home_account_id`).
    let isHome: Bool

    var json: JSONValue {
        .object(["realm": .string(realm), "local_account_id": localAccountId.map(JSONValue.string) ?? .null, "is_home": .bool(isHome)])
    }

    /// Reads the `tenant_profiles` column (a JSON array the store aggregates).
    static func list(from text: String?) -> [TenantProfile]? {
        guard let text, let items = JSONValue.parse(text)?.arrayValue else { return nil }
        return items.compactMap { item in
            guard let realm = item["realm"]?.stringValue else { return nil }
            return TenantProfile(realm: realm, localAccountId: item["local_account_id"]?.stringValue, isHome: item["is_home"]?.boolValue ?? false)
        }
    }
}
