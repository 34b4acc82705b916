import Foundation
import IdentityCore
import TokenRelayBase

/// One signed-in user for this client (behaviour §1, §3) as stored.
package struct AccountRecord: Sendable, Equatable {
    package enum State: String, Sendable {
        case active
        case interactionRequired = "interaction_required"
    }

    // The fields live in one immutable object shared by every copy (not private: release builds
    // inline its reads into the other layers, Package.swift): an account is copied into
    // and out of memory, the resolver and the answer on every cached silent request (behaviour
    // §10), and a copy of seventeen strings, arrays and dictionaries cost as many reference
    // count updates.
    package let fields: Fields

    package var accountId: String { fields.accountId }
    package var clientId: String { fields.clientId }
    package var environment: String { fields.environment }
    package var homeAccountId: String? { fields.homeAccountId }
    package var realm: String { fields.realm }
    package var localAccountId: String? { fields.localAccountId }
    package var username: String? { fields.username }
    package var name: String? { fields.name }
    package var authority: String { fields.authority }
    package var authorityType: AuthorityType { fields.authorityType }
    package var state: State { fields.state }
    package var idTokenClaims: String { fields.idTokenClaims }
    package var createdAt: String { fields.createdAt }
    package var lastUsedAt: String? { fields.lastUsedAt }
    /// Every tenant the user signed into (behaviour §12 Accounts: a guest is one account with several
    /// profiles); empty for an import not yet redeemed.
    package var tenantProfiles: [TenantProfile] { fields.tenantProfiles }
    /// The account's external ids by owner (an API key's name, behaviour §3.7): at most one per
    /// owner, each unique within its owner. Shown only to callers of that owner.
    package var externalIds: [String: String] { fields.externalIds }
    /// The key owner that imported the account (an API key's name, or `bootstrap`) while no
    /// redemption has confirmed its user (`home_account_id` null); nil for every other account,
    /// and for imports written before migration 0020 recorded their owner. Such an account
    /// exists for that owner only (behaviour §3.6): carried here so that the check holds on the
    /// memory path too, without a database read (``isVisible(toOwner:)``).
    package var unconfirmedImporter: String? { fields.unconfirmedImporter }
    /// `idTokenClaims` parsed once here rather than on every answer that shows the account.
    package var claims: JSONValue { fields.claims }
    /// `json(owner: nil)` encoded once: the account part of every cached token answer
    /// (behaviour §10), with `"external_id":null`; ``writeJSON(owner:into:)`` puts an owner's
    /// external id in its place.
    package private(set) var jsonBytes: [UInt8] = []
    /// Where the `null` of `"external_id":null` starts in `jsonBytes`.
    private var externalIdNullOffset = 0

    package init(
        accountId: String, clientId: String, environment: String, homeAccountId: String?, realm: String, localAccountId: String?,
        username: String?, name: String?, authority: String, authorityType: AuthorityType, state: State, idTokenClaims: String,
        createdAt: String, lastUsedAt: String?, tenantProfiles: [TenantProfile]? = nil, externalIds: [String: String] = [:],
        unconfirmedImporter: String? = nil
    ) {
        fields = Fields(
            accountId: accountId, clientId: clientId, environment: environment, homeAccountId: homeAccountId, realm: realm,
            localAccountId: localAccountId, username: username, name: name, authority: authority, authorityType: authorityType,
            state: state, idTokenClaims: idTokenClaims, createdAt: createdAt, lastUsedAt: lastUsedAt,
            tenantProfiles: tenantProfiles
                ?? (homeAccountId == nil
                    ? [] : [TenantProfile(realm: realm, localAccountId: localAccountId, isHome: homeAccountId?.hasSuffix("." + realm) ?? true)]),
            externalIds: externalIds, claims: JSONValue.parse(idTokenClaims) ?? .object([:]),
            unconfirmedImporter: homeAccountId == nil ? unconfirmedImporter : nil)
        jsonBytes = JSONWriter.encode(json(owner: nil))
        externalIdNullOffset = Self.offset(of: Self.externalIdNullMember, in: jsonBytes).map { $0 + Self.externalIdNullMember.count - 4 } ?? 0
    }

    package static func == (lhs: AccountRecord, rhs: AccountRecord) -> Bool {
        lhs.fields === rhs.fields || lhs.fields == rhs.fields
    }

    /// The stored fields, as the initializer received them (`claims` parsed from `idTokenClaims`).
    package final class Fields: Sendable, Equatable {
        package let accountId: String
        package let clientId: String
        package let environment: String
        package let homeAccountId: String?
        package let realm: String
        package let localAccountId: String?
        package let username: String?
        package let name: String?
        package let authority: String
        package let authorityType: AuthorityType
        package let state: State
        package let idTokenClaims: String
        package let createdAt: String
        package let lastUsedAt: String?
        package let tenantProfiles: [TenantProfile]
        package let externalIds: [String: String]
        package let claims: JSONValue
        package let unconfirmedImporter: String?

        package init(
            accountId: String, clientId: String, environment: String, homeAccountId: String?, realm: String, localAccountId: String?, username: String?,
            name: String?, authority: String, authorityType: AuthorityType, state: State, idTokenClaims: String, createdAt: String, lastUsedAt: String?,
            tenantProfiles: [TenantProfile], externalIds: [String: String], claims: JSONValue, unconfirmedImporter: String?
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
            self.tenantProfiles = tenantProfiles
            self.externalIds = externalIds
            self.claims = claims
            self.unconfirmedImporter = unconfirmedImporter
        }

        /// Heap bytes of this object itself (``HeapCost/object(fieldBytes:)``), not of its strings.
        package static let objectCost = HeapCost.object(
            fieldBytes: MemoryLayout<
                (
                    String, String, String, String?, String, String?, String?, String?, String, AuthorityType, State, String, String, String?,
                    [TenantProfile], [String: String], JSONValue, String?
                )
            >.size)

        package static func == (lhs: Fields, rhs: Fields) -> Bool {
            lhs.accountId == rhs.accountId && lhs.clientId == rhs.clientId && lhs.environment == rhs.environment && lhs.homeAccountId == rhs.homeAccountId
                && lhs.realm == rhs.realm && lhs.localAccountId == rhs.localAccountId && lhs.username == rhs.username && lhs.name == rhs.name
                && lhs.authority == rhs.authority && lhs.authorityType == rhs.authorityType && lhs.state == rhs.state && lhs.idTokenClaims == rhs.idTokenClaims
                && lhs.createdAt == rhs.createdAt && lhs.lastUsedAt == rhs.lastUsedAt && lhs.tenantProfiles == rhs.tenantProfiles
                && lhs.externalIds == rhs.externalIds && lhs.unconfirmedImporter == rhs.unconfirmedImporter
        }
    }

    /// The member as JSONWriter writes it. Inside a string value every `"` is escaped (`\"`),
    /// so these bytes occur only as the member itself.
    private static let externalIdNullMember = Array(#""external_id":null"#.utf8)

    /// The account object of the API (behaviour §3.5, §12 Accounts) as a caller of `owner` sees
    /// it: `external_id` is that owner's external id of the account, or null (also for nil, on
    /// open routes and in the command line's view).
    package func json(owner: String?) -> JSONValue {
        .object([
            "external_id": owner.flatMap { externalIds[$0] }.map(JSONValue.string) ?? .null,
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

    /// The account as `token-relay accounts` shows it to an operator (behaviour §8): the API's
    /// object as no owner sees it (`external_id` null) plus every owner's external id,
    /// `external_ids` (owner → external id).
    package var operatorJSON: JSONValue {
        guard case .object(var members) = json(owner: nil) else { return json(owner: nil) }
        members["external_ids"] = .object(externalIds.mapValues(JSONValue.string))
        return .object(members)
    }

    /// Appends `json(owner:)` encoded, from `jsonBytes` (the cached token path, behaviour §10):
    /// copied as it is, or with the owner's external id written where the `null` is.
    package func writeJSON(owner: String?, into out: inout [UInt8]) {
        guard let owner, let externalId = externalIds[owner], externalIdNullOffset > 0 else {
            out.append(contentsOf: jsonBytes)
            return
        }
        out.append(contentsOf: jsonBytes[..<externalIdNullOffset])
        JSONWriter.writeString(externalId, into: &out)
        out.append(contentsOf: jsonBytes[(externalIdNullOffset + 4)...])
    }

    /// The first index of `needle` in `haystack`.
    private static func offset(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return start }
        }
        return nil
    }

    /// Whether a caller of `owner` (its key's name, `bootstrap` for the bootstrap key) may know
    /// the account exists (behaviour §3.6): an import no redemption has confirmed is its
    /// importer's only; to any other owner its id names nothing. Nil (open routes, background
    /// work, the command line) sees every account. ``TokenStore/provenOr(_:of:)`` is the same
    /// rule in SQL.
    package func isVisible(toOwner owner: String?) -> Bool {
        guard let importer = unconfirmedImporter, let owner else { return true }
        return importer == owner
    }

    /// True when the account (or one of its guest profiles) is in `tenantId` (case-insensitive).
    package func isIn(tenant tenantId: String) -> Bool {
        realm.caseInsensitiveCompare(tenantId) == .orderedSame
            || tenantProfiles.contains { $0.realm.caseInsensitiveCompare(tenantId) == .orderedSame }
    }
}

/// One tenant an account signed into: `{realm, local_account_id, is_home}` (behaviour §12 Accounts).
package struct TenantProfile: Sendable, Equatable {
    package let realm: String
    /// The user's `oid` in that tenant.
    package let localAccountId: String?
    /// Whether `realm` is the home tenant (the `utid` of `home_account_id`).
    package let isHome: Bool

    package init(realm: String, localAccountId: String?, isHome: Bool) {
        self.realm = realm
        self.localAccountId = localAccountId
        self.isHome = isHome
    }

    package var json: JSONValue {
        .object(["realm": .string(realm), "local_account_id": localAccountId.map(JSONValue.string) ?? .null, "is_home": .bool(isHome)])
    }

    /// Reads the `tenant_profiles` column (a JSON array the store aggregates).
    package static func list(from text: String?) -> [TenantProfile]? {
        guard let text, let items = JSONValue.parse(text)?.arrayValue else { return nil }
        return items.compactMap { item in
            guard let realm = item["realm"]?.stringValue else { return nil }
            return TenantProfile(realm: realm, localAccountId: item["local_account_id"]?.stringValue, isHome: item["is_home"]?.boolValue ?? false)
        }
    }
}
