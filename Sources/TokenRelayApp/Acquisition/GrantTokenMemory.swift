import Foundation
import IdentityCore
import Synchronization

/// This replica's memory of app and on-behalf-of access tokens, in front of the encrypted
/// `grant_access_tokens` table. Keyed by owner (`app:{tenant}`, `obo:{sha256}`); bounded,
/// because every distinct OBO assertion is an owner of its own.
final class GrantTokenMemory: Sendable {
    /// Owners kept before expired entries are swept (and, if still too many, all are dropped).
    static let capacity = 10_000
    private let entries = Mutex<[String: [StoredAccessToken]]>([:])

    /// The longest-lived entry of `owner` in (environment, realm) covering `scopes` for which
    /// `usable` holds.
    func lookup(owner: String, environment: String, realm: String, scopes: ScopeSet, usable: (StoredAccessToken) -> Bool) -> StoredAccessToken? {
        entries.withLock { entries in
            (entries[owner] ?? []).filter { $0.environment == environment && $0.realm == realm && $0.scopeSet.isSuperset(of: scopes) && usable($0) }
                .max { $0.expiresOn < $1.expiresOn }
        }
    }

    /// Stores `token` (owner in `accountId`), replacing the owner's entry with the same target.
    func store(_ token: StoredAccessToken, now: Int = Int(Date().timeIntervalSince1970)) {
        entries.withLock { entries in
            if entries[token.accountId] == nil && entries.count >= Self.capacity {
                entries = entries.filter { $0.value.contains { $0.expiresOn > now } }
                if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            }
            var list = entries[token.accountId, default: []]
            list.removeAll {
                $0.expiresOn <= now || ($0.environment == token.environment && $0.realm == token.realm && $0.scopeSet == token.scopeSet)
            }
            list.append(token)
            entries[token.accountId] = list
        }
    }

    var count: Int { entries.withLock { $0.values.reduce(0) { $0 + $1.count } } }
}
