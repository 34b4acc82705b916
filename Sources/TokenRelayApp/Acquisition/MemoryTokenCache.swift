import Foundation
import IdentityCore
import Synchronization

/// This replica's in-memory access-token cache, in front of the encrypted persistent cache.
///
/// A hit here costs no database round trip and no suspension (behaviour §10). Entries are dropped
/// when their account is deleted or re-signed-in in this replica.
final class MemoryTokenCache: Sendable {
    private struct Entry {
        let token: StoredAccessToken
        /// `token.scopeSet`'s canonical scopes, and lower-cased: normalised once when stored
        /// rather than on every lookup (the same superset rule as `ScopeSet.isSuperset`).
        let canonical: Set<String>
        let target: Set<String>

        /// True when every requested scope is here, case-insensitively; an exact match (the
        /// usual case) needs no lower-casing.
        func covers(_ scopes: ScopeSet) -> Bool {
            scopes.canonical.allSatisfy { canonical.contains($0) || target.contains($0.lowercased()) }
        }
    }

    private let entries = Mutex<[String: [Entry]]>([:])

    /// The best entry for `accountId` whose scopes cover `scopes` in (environment, realm).
    func lookup(accountId: String, environment: String, realm: String, scopes: ScopeSet) -> StoredAccessToken? {
        entries.withLock { entries in
            var best: StoredAccessToken?
            for entry in entries[accountId] ?? [] where entry.token.environment == environment && entry.token.realm == realm && entry.covers(scopes) {
                if best == nil || best!.expiresOn < entry.token.expiresOn { best = entry.token }
            }
            return best
        }
    }

    /// Stores `token`, replacing entries it overlaps (same rule as the persistent cache).
    /// Stores `token`; the account's entries that have expired (`now`, unix seconds) go at the same
    /// time, so memory follows live tokens rather than every token ever seen.
    func store(_ token: StoredAccessToken, now: Int = Int(Date().timeIntervalSince1970)) {
        let lowered = Set(token.scopes.map { $0.lowercased() })
        let canonical = token.scopeSet.canonical
        let entry = Entry(token: token, canonical: Set(canonical), target: Set(canonical.map { $0.lowercased() }))
        entries.withLock { entries in
            var list = entries[token.accountId, default: []]
            list.removeAll {
                $0.token.expiresOn <= now
                    || ($0.token.environment == token.environment && $0.token.realm == token.realm
                        && !lowered.isDisjoint(with: $0.token.scopes.map { $0.lowercased() }))
            }
            list.append(entry)
            entries[token.accountId] = list
        }
    }

    /// Drops every entry (cross-replica notifications may have been missed; the persistent
    /// cache refills memory on the next requests).
    func removeAll() {
        entries.withLock { $0.removeAll() }
    }

    /// Removes `token` (a resource refused it); a newer token for the same scopes stays.
    func remove(_ token: StoredAccessToken) {
        entries.withLock { entries in
            entries[token.accountId]?.removeAll { $0.token == token }
        }
    }

    func removeAll(accountId: String) {
        _ = entries.withLock { $0.removeValue(forKey: accountId) }
    }

    var count: Int { entries.withLock { $0.values.reduce(0) { $0 + $1.count } } }
}
