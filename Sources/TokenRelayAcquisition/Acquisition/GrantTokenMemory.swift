import Foundation
import IdentityCore
import TokenRelayBase
import TokenRelayStore

/// This replica's memory of app and on-behalf-of access tokens, in front of the encrypted
/// `grant_access_tokens` table. Keyed by owner (`app:{tenant}`, `obo:{sha256}`); bounded,
/// because every distinct OBO assertion is an owner of its own.
///
/// An owner is held until its longest-lived token expires; when `capacity` owners are held,
/// owners whose tokens have all expired go first, then the one whose tokens end soonest
/// (``ExpiringMap``; this used to drop every owner at once).
package final class GrantTokenMemory: Sendable {
    package init() {}

    /// Owners kept at most.
    package static let capacity = 10_000
    private let entries = ExpiringMap<String, [StoredAccessToken]>(capacity: GrantTokenMemory.capacity)

    /// The longest-lived entry of `owner` in (environment, realm) covering `scopes` for which
    /// `usable` holds.
    /// - Parameter now: unix seconds; an owner whose tokens have all expired is not looked at.
    package func lookup(
        owner: String, environment: String, realm: String, scopes: ScopeSet, now: Int,
        usable: (StoredAccessToken) -> Bool
    ) -> StoredAccessToken? {
        (entries.value(for: owner, now: Double(now)) ?? [])
            .filter { $0.environment == environment && $0.realm == realm && $0.scopeSet.isSuperset(of: scopes) && usable($0) }
            .max { $0.expiresOn < $1.expiresOn }
    }

    /// Stores `token` (owner in `accountId`), replacing the owner's entry with the same target;
    /// the owner's expired entries (`now`, unix seconds) go at the same time.
    package func store(_ token: StoredAccessToken, now: Int) {
        entries.update(token.accountId, now: Double(now)) { entry in
            var list = entry?.value ?? []
            list.removeAll {
                $0.expiresOn <= now || ($0.environment == token.environment && $0.realm == token.realm && $0.scopeSet == token.scopeSet)
            }
            list.append(token)
            entry = .init(value: list, expiresAt: Double(list.map(\.expiresOn).max() ?? token.expiresOn))
        }
    }

    /// Drops every owner holding a token of `realm` (lower-cased; a suspended tenant, behaviour §12 Tenants).
    /// - Complexity: O(owners held).
    package func removeAll(realm: String) {
        entries.removeAll { _, list in list.contains { $0.realm.lowercased() == realm } }
    }

    /// Tokens held, in all owners.
    package var count: Int { entries.values.reduce(0) { $0 + $1.count } }
}
