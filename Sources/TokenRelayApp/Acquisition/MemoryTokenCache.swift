import IdentityCore
import Synchronization

/// This replica's in-memory access-token cache, in front of the encrypted persistent cache.
///
/// A hit here costs no database round trip and no suspension (SPEC §10). Entries are dropped
/// when their account is deleted or re-signed-in in this replica.
final class MemoryTokenCache: Sendable {
    private struct Entry {
        let token: StoredAccessToken
        /// `token.scopeSet`'s lower-cased canonical scopes, normalised once when stored rather
        /// than on every lookup (the same superset rule as `ScopeSet.isSuperset`).
        let target: Set<String>
    }

    private let entries = Mutex<[String: [Entry]]>([:])

    /// The best entry for `accountId` whose scopes cover `scopes` in (environment, realm).
    func lookup(accountId: String, environment: String, realm: String, scopes: ScopeSet) -> StoredAccessToken? {
        let wanted = scopes.canonical.map { $0.lowercased() }
        return entries.withLock { entries in
            entries[accountId]?.filter { $0.token.environment == environment && $0.token.realm == realm && $0.target.isSuperset(of: wanted) }
                .max { $0.token.expiresOn < $1.token.expiresOn }?.token
        }
    }

    /// Stores `token`, replacing entries it overlaps (same rule as the persistent cache).
    func store(_ token: StoredAccessToken) {
        let lowered = Set(token.scopes.map { $0.lowercased() })
        let entry = Entry(token: token, target: Set(token.scopeSet.canonical.map { $0.lowercased() }))
        entries.withLock { entries in
            var list = entries[token.accountId, default: []]
            list.removeAll {
                $0.token.environment == token.environment && $0.token.realm == token.realm && !lowered.isDisjoint(with: $0.token.scopes.map { $0.lowercased() })
            }
            list.append(entry)
            entries[token.accountId] = list
        }
    }

    func removeAll(accountId: String) {
        _ = entries.withLock { $0.removeValue(forKey: accountId) }
    }

    var count: Int { entries.withLock { $0.values.reduce(0) { $0 + $1.count } } }
}
