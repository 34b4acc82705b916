import IdentityCore
import TokenRelayBase
import TokenRelayStore

/// What an API key may reach besides its permissions (behaviour §7, §12 Permissions): the tenants
/// whose accounts it sees, the scopes it may ask for, and whose unconfirmed imports it sees (its
/// owner's, behaviour §3.6). Empty lists mean no limit.
///
/// An account outside the key's tenants, or imported by another owner and not yet confirmed, is
/// invisible (404 as an unknown id, `DELETE` 204 no-op, left out of lists); a tenant, authority
/// or scope the caller names explicitly and may not use is 403 `forbidden`.
package struct KeyAccess: Sendable, Equatable {
    /// Allowed tenant ids or domains, lower-cased; empty: every tenant.
    package var tenants: Set<String> { limits.tenants }
    /// Case-insensitive globs (`*` any run of characters, `?` one character) over scopes,
    /// lower-cased; empty: every scope.
    package var scopePatterns: [String] { limits.scopePatterns }
    /// The key's owner (its name, `bootstrap` for the bootstrap key): of the imports no redemption
    /// has confirmed, it sees only this owner's (``AccountRecord/isVisible(toOwner:)``). Nil: all
    /// (open routes, background work).
    package var owner: String? { limits.owner }

    /// The three fields in one shared object: the access is copied into the caller, the request
    /// context and the silent plan of every request, and a copy is then one reference count
    /// instead of three (behaviour §10).
    private let limits: Limits

    private final class Limits: Sendable {
        let tenants: Set<String>
        let scopePatterns: [String]
        let owner: String?
        /// Whether the tenants and the scopes are limited, worked out once: a look at a set or
        /// an array through the shared object copied it, about 140 instructions of every token
        /// request of an unlimited key (behaviour §10).
        let limitsTenants: Bool
        let limitsScopes: Bool

        init(tenants: Set<String>, scopePatterns: [String], owner: String?) {
            self.tenants = tenants
            self.scopePatterns = scopePatterns
            self.owner = owner
            limitsTenants = !tenants.isEmpty
            limitsScopes = !scopePatterns.isEmpty
        }
    }

    package init(tenants: [String] = [], scopePatterns: [String] = [], owner: String? = nil) {
        limits = Limits(tenants: Set(tenants.map { $0.lowercased() }), scopePatterns: scopePatterns.map { $0.lowercased() }, owner: owner)
    }

    package static func == (lhs: KeyAccess, rhs: KeyAccess) -> Bool {
        lhs.limits === rhs.limits
            || (lhs.tenants == rhs.tenants && lhs.scopePatterns == rhs.scopePatterns && lhs.owner == rhs.owner)
    }

    /// No limit: the bootstrap key, keys created without `--tenants`/`--scopes`, open routes.
    package static let unrestricted = KeyAccess()

    package var limitsTenants: Bool { limits.limitsTenants }
    /// Whether the key may ask only for some scopes.
    package var limitsScopes: Bool { limits.limitsScopes }

    /// The key's tenants, sorted, as the stores' `visibleTenants` list filters; nil: every tenant.
    package var visibleTenants: [String]? { limitsTenants ? tenants.sorted() : nil }

    /// The tenants an account belongs to for the key's tenant limit: its realm and every tenant
    /// profile (a guest in several tenants; behaviour §12 Accounts: "per-key tenant limits match any
    /// profile"). `TokenStore.listAccounts(visibleTenants:)` matches the same set in SQL.
    package static func tenants(of account: AccountRecord) -> [String] {
        [account.realm] + account.tenantProfiles.map(\.realm)
    }

    /// Whether the key sees `account` at all: an unconfirmed import of another owner, or an
    /// account outside its tenants, is not there for it. Reads only the record, so the memory
    /// path (behaviour §10) checks it without a database read.
    package func sees(_ account: AccountRecord) -> Bool {
        account.isVisible(toOwner: owner) && (!limitsTenants || Self.tenants(of: account).contains { tenants.contains($0.lowercased()) })
    }

    /// Whether the key may name `tenant` (a `tenant_id` filter, an authority's tenant).
    package func allows(tenant: String) -> Bool {
        !limitsTenants || tenants.contains(tenant.lowercased())
    }

    /// Whether every scope of `scopes` matches one of the key's patterns.
    package func allows(_ scopes: ScopeSet) -> Bool {
        !limitsScopes || scopes.canonical.allSatisfy(allows(scope:))
    }

    /// Whether every scope `token` carries matches one of the key's patterns. Free for a key
    /// without patterns: the token's scopes are only normalised when there is something to check
    /// (normalising them on every cached answer was 9,300 instructions of a 89,000 request).
    package func allows(_ token: StoredAccessToken) -> Bool {
        !limitsScopes || allows(token.scopeSet)
    }

    /// Whether `scope` (canonical: Graph scopes short, others full URIs) matches a pattern, in its
    /// canonical or full-URI form (`User.Read` and `https://graph.microsoft.com/User.Read` are one
    /// scope, behaviour §1).
    package func allows(scope: String) -> Bool {
        if !limitsScopes { return true }
        let short = scope.lowercased()
        let full = short.contains("://") ? short : "https://graph.microsoft.com/" + short
        return scopePatterns.contains { Self.glob($0, matches: short) || Self.glob($0, matches: full) }
    }

    /// 403 `forbidden` naming `field` unless the key may name `tenant`.
    package func check(tenant: String, field: String) throws(RelayError) {
        guard allows(tenant: tenant) else {
            throw RelayError(.forbidden, "This API key may not use tenant '\(tenant)'.", extensions: ["field": .string(field)])
        }
    }

    /// 403 `forbidden` naming `field` unless the key may ask for every scope of `scopes`.
    package func check(_ scopes: ScopeSet, field: String) throws(RelayError) {
        guard allows(scopes) else { throw refusal(scopes, field: field, "This API key may not request the scope(s)") }
    }

    /// 403 `forbidden` naming `scopes` when `token`, about to be served, carries a scope the key
    /// may not ask for: the platform may grant more than was asked (scopes consented earlier,
    /// RFC 6749 §5.1).
    package func check(served token: StoredAccessToken) throws(RelayError) {
        guard allows(token) else { throw refusal(token.scopeSet, field: "scopes", "The token issued carries scope(s) this API key may not use:") }
    }

    private func refusal(_ scopes: ScopeSet, field: String, _ lead: String) -> RelayError {
        let refused = scopes.canonical.filter { !allows(scope: $0) }
        return RelayError(
            .forbidden, "\(lead) \(refused.joined(separator: ", ")).",
            extensions: ["field": .string(field), "scopes": .array(refused.map(JSONValue.string))])
    }

    /// 403 `forbidden` unless the key may use the authority's tenant.
    package func check(authority: Authority, field: String = "authority") throws(RelayError) {
        guard allows(tenant: authority.tenant) else {
            throw RelayError(.forbidden, "This API key may not use the authority's tenant '\(authority.tenant)'.", extensions: ["field": .string(field)])
        }
    }

    /// 403 `forbidden` on `authority` unless the key may use `realm`, the tenant a token would
    /// come from: a key that sees a guest account through one tenant profile gets tokens of
    /// that tenant only (named with `authority`), never of the account's home tenant.
    package func check(realm: String) throws(RelayError) {
        guard allows(tenant: realm) else {
            throw RelayError(
                .forbidden, "This API key may not use tenant '\(realm)'; name one of its tenants in 'authority'.",
                extensions: ["field": .string("authority")])
        }
    }

    /// Glob match over lower-cased UTF-8: `*` any run (also empty, also `/`), `?` one byte.
    /// - Complexity: O(pattern × text) worst case, linear for the usual one-star pattern.
    package static func glob(_ pattern: String, matches text: String) -> Bool {
        let p = Array(pattern.utf8)
        let t = Array(text.utf8)
        var pi = 0
        var ti = 0
        var star = -1
        var resume = 0
        while ti < t.count {
            if pi < p.count && (p[pi] == UInt8(ascii: "?") || p[pi] == t[ti]) {
                pi += 1
                ti += 1
            } else if pi < p.count && p[pi] == UInt8(ascii: "*") {
                star = pi
                resume = ti
                pi += 1
            } else if star >= 0 {
                pi = star + 1
                resume += 1
                ti = resume
            } else {
                return false
            }
        }
        while pi < p.count && p[pi] == UInt8(ascii: "*") { pi += 1 }
        return pi == p.count
    }
}
