import IdentityCore
import Synchronization

/// This replica's in-memory access-token cache, in front of the encrypted persistent cache.
///
/// A hit here costs no database round trip and no suspension (SPEC §10). Entries are dropped
/// when their account is deleted or re-signed-in in this replica.
final class MemoryTokenCache: Sendable {
    private let entries = Mutex<[String: [StoredAccessToken]]>([:])

    /// The best entry for `accountId` whose scopes cover `scopes` in (environment, realm).
    func lookup(accountId: String, environment: String, realm: String, scopes: ScopeSet) -> StoredAccessToken? {
        entries.withLock { entries in
            entries[accountId]?.filter { $0.environment == environment && $0.realm == realm && $0.scopeSet.isSuperset(of: scopes) }
                .max { $0.expiresOn < $1.expiresOn }
        }
    }

    /// Stores `token`, replacing entries it overlaps (same rule as the persistent cache).
    func store(_ token: StoredAccessToken) {
        let lowered = Set(token.scopes.map { $0.lowercased() })
        entries.withLock { entries in
            var list = entries[token.accountId, default: []]
            list.removeAll { $0.environment == token.environment && $0.realm == token.realm && !lowered.isDisjoint(with: $0.scopes.map { $0.lowercased() }) }
            list.append(token)
            entries[token.accountId] = list
        }
    }

    func removeAll(accountId: String) {
        _ = entries.withLock { $0.removeValue(forKey: accountId) }
    }

    var count: Int { entries.withLock { $0.values.reduce(0) { $0 + $1.count } } }
}
