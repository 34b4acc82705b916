import IdentityCore
import TokenRelayBase

/// An access-token cache entry (behaviour §1): keyed by (account, environment, realm, client_id,
/// target scope set), decrypted for use in this process only.
package struct StoredAccessToken: Sendable, Equatable {
    // The fields live in one immutable object shared by every copy, as `AccountRecord`'s do: a
    // served token is copied from memory into the plan, the answer and the aftermath of every
    // cached silent request (behaviour §10), and a copy of five strings and an array cost as many
    // reference count updates.
    package let fields: Fields

    package var accountId: String { fields.accountId }
    package var environment: String { fields.environment }
    package var realm: String { fields.realm }
    package var clientId: String { fields.clientId }
    /// Granted scopes in canonical form.
    package var scopes: [String] { fields.scopes }
    package var secret: String { fields.secret }
    /// Unix seconds.
    package var expiresOn: Int { fields.expiresOn }
    package var extExpiresOn: Int? { fields.extExpiresOn }
    package var refreshOn: Int? { fields.refreshOn }
    /// The token's `uti` claim (``AccessTokenIdentifier``), read once when the entry is made so a
    /// cached answer counts its receipt without parsing the token; nil for an opaque token.
    package var uti: String? { fields.uti }
    /// ``Fields/utiHash``.
    package var utiHash: Int? { fields.utiHash }
    /// The API key id of the request that made the service obtain this token (behaviour §12
    /// Audit: token provenance), `sign-in-link`/`import` as the audit actors name them, nil for
    /// work no request awaits or a token read back from the store. Only the store's write reads it.
    package var obtainedBy: String? { fields.obtainedBy }

    package init(
        accountId: String, environment: String, realm: String, clientId: String, scopes: [String], secret: String, expiresOn: Int, extExpiresOn: Int?,
        refreshOn: Int?, obtainedBy: String? = nil
    ) {
        fields = Fields(
            accountId: accountId, environment: environment, realm: realm, clientId: clientId, scopes: scopes, secret: secret, expiresOn: expiresOn,
            extExpiresOn: extExpiresOn, refreshOn: refreshOn, obtainedBy: obtainedBy)
    }

    package static func == (lhs: StoredAccessToken, rhs: StoredAccessToken) -> Bool {
        lhs.fields === rhs.fields || lhs.fields == rhs.fields
    }

    /// The stored fields, as the initializer received them, and the `uti` read from `secret`.
    package final class Fields: Sendable, Equatable {
        package let accountId: String
        package let environment: String
        package let realm: String
        package let clientId: String
        package let scopes: [String]
        package let secret: String
        package let expiresOn: Int
        package let extExpiresOn: Int?
        package let refreshOn: Int?
        package let uti: String?
        package let obtainedBy: String?
        /// `uti?.hashValue`, made once: the issuance tally of every answer hashes the `uti`
        /// (``IssuanceCounter/Pair``, behaviour §10). Valid in this process only (Swift seeds
        /// its hashes per process), as the tally is.
        package let utiHash: Int?

        init(
            accountId: String, environment: String, realm: String, clientId: String, scopes: [String], secret: String, expiresOn: Int,
            extExpiresOn: Int?, refreshOn: Int?, obtainedBy: String?
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
            uti = AccessTokenIdentifier.uti(of: secret)
            self.obtainedBy = obtainedBy
            utiHash = uti?.hashValue
        }

        /// Heap bytes of this object itself (``HeapCost/object(fieldBytes:)``), not of its strings.
        package static let objectCost = HeapCost.object(
            fieldBytes: MemoryLayout<(String, String, String, String, [String], String, Int, Int?, Int?, String?, String?, Int?)>.size)

        /// The same token whoever obtained it (`obtainedBy` is where it came from, not what it
        /// is; `uti` is read from `secret`).
        package static func == (lhs: Fields, rhs: Fields) -> Bool {
            lhs.accountId == rhs.accountId && lhs.environment == rhs.environment && lhs.realm == rhs.realm && lhs.clientId == rhs.clientId
                && lhs.scopes == rhs.scopes && lhs.secret == rhs.secret && lhs.expiresOn == rhs.expiresOn && lhs.extExpiresOn == rhs.extExpiresOn
                && lhs.refreshOn == rhs.refreshOn
        }
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
