import Foundation
import IdentityCore
import TokenRelayBase
import TokenRelayStore

/// This replica's in-memory access-token cache, in front of the encrypted persistent cache.
///
/// A hit here costs no database round trip and no suspension (behaviour §10). Entries are dropped
/// when their account is deleted or re-signed-in in this replica. At most `capacityBytes` are
/// held, counted by what each entry really holds (the token, its prebuilt answer, its scopes;
/// ``ByteBoundedLRU``), the least recently used account's tokens out first; a token that memory
/// no longer holds is answered from the persistent cache and brought back (``TokenCacheReader``).
package final class MemoryTokenCache: Sendable {
    /// A token memory serves, and the bytes of its answer made when it was stored.
    package struct Hit: Sendable {
        package let token: StoredAccessToken
        package let answer: TokenAnswerBytes

        package init(token: StoredAccessToken, answer: TokenAnswerBytes) {
            self.token = token
            self.answer = answer
        }
    }

    private struct Entry: Sendable {
        let token: StoredAccessToken
        /// `token.scopeSet`'s canonical scopes, and lower-cased: normalised once when stored
        /// rather than on every lookup (the same superset rule as `ScopeSet.isSuperset`).
        let canonical: Set<String>
        /// The same canonical scopes in their sorted order: a request for exactly the token's
        /// scopes (the usual case) is settled by comparing two lists, without hashing a scope.
        let canonicalList: [String]
        let target: Set<String>
        let answer: TokenAnswerBytes

        /// True when every requested scope is here, case-insensitively; an exact match (the
        /// usual case) needs no lower-casing.
        func covers(_ scopes: ScopeSet) -> Bool {
            scopes.canonical == canonicalList || scopes.canonical.allSatisfy { canonical.contains($0) || target.contains($0.lowercased()) }
        }

        /// Heap bytes this entry holds (``HeapCost``): the token's fields object and strings (its `uti` and `obtainedBy` too), its scopes as granted,
        /// canonical and lower-cased, and the prebuilt answer (its object and both parts). Its own fields are in the list's
        /// buffer (``MemoryTokenCache/cost(of:)``).
        var cost: Int {
            StoredAccessToken.Fields.objectCost + HeapCost.string(token.accountId) + HeapCost.string(token.environment) + HeapCost.string(token.realm)
                + HeapCost.string(token.clientId) + HeapCost.string(token.secret) + HeapCost.strings(token.scopes)
                + HeapCost.string(token.uti) + HeapCost.string(token.obtainedBy)
                + HeapCost.set(canonical) + HeapCost.array(canonicalList) + HeapCost.set(target) + answer.heapCost
        }
    }

    private let entries: ByteBoundedLRU<String, [Entry]>

    /// Heap bytes one account's entries hold: the list's buffer and each entry's. The key, the
    /// account id, shares its buffer with the entries' tokens.
    private static func cost(of list: [Entry]) -> Int {
        list.reduce(HeapCost.array(list)) { $0 + $1.cost }
    }

    /// - Parameter capacityBytes: most bytes held (`TOKENRELAY_MEMORY_CACHE_MB`'s share for access
    ///   tokens). Default 48 MiB.
    package init(capacityBytes: Int = 48 << 20) {
        entries = ByteBoundedLRU(capacityBytes: capacityBytes)
    }

    /// The best entry for `accountId` whose scopes cover `scopes` in (environment, realm).
    package func lookup(accountId: String, environment: String, realm: String, scopes: ScopeSet) -> StoredAccessToken? {
        hit(accountId: accountId, environment: environment, realm: realm, scopes: scopes)?.token
    }

    /// The best entry for `accountId` whose scopes cover `scopes` in (environment, realm), with
    /// its prebuilt answer; the account becomes the most recently used.
    package func hit(accountId: String, environment: String, realm: String, scopes: ScopeSet) -> Hit? {
        guard let list = entries.value(for: accountId) else { return nil }
        var best: Entry?
        for entry in list where entry.token.environment == environment && entry.token.realm == realm && entry.covers(scopes) {
            if best == nil || best!.token.expiresOn < entry.token.expiresOn { best = entry }
        }
        return best.map { Hit(token: $0.token, answer: $0.answer) }
    }

    /// Stores `token`, replacing entries it overlaps (same rule as the persistent cache); the
    /// account's entries that have expired (`now`, unix seconds) go at the same time, so memory
    /// follows live tokens rather than every token ever seen.
    package func store(_ token: StoredAccessToken, now: Int) {
        let lowered = Set(token.scopes.map { $0.lowercased() })
        let canonical = token.scopeSet.canonical
        let entry = Entry(
            token: token, canonical: Set(canonical), canonicalList: canonical, target: Set(canonical.map { $0.lowercased() }),
            answer: TokenAnswerBytes(cached: token))
        entries.update(token.accountId) { held in
            var list = held?.value ?? []
            list.removeAll {
                $0.token.expiresOn <= now
                    || ($0.token.environment == token.environment && $0.token.realm == token.realm
                        && !lowered.isDisjoint(with: $0.token.scopes.map { $0.lowercased() }))
            }
            list.append(entry)
            held = (list, Self.cost(of: list))
        }
    }

    /// Drops every entry (cross-replica notifications may have been missed; the persistent
    /// cache refills memory on the next requests).
    package func removeAll() {
        entries.removeAll()
    }

    /// Removes `token` (a resource refused it); a newer token for the same scopes stays.
    package func remove(_ token: StoredAccessToken) {
        entries.update(token.accountId) { held in
            guard var list = held?.value else { return }
            list.removeAll { $0.token == token }
            held = list.isEmpty ? nil : (list, Self.cost(of: list))
        }
    }

    /// Drops every account holding a token of `realm` (lower-cased; a suspended tenant, behaviour §12 Tenants).
    /// - Complexity: O(tokens held).
    package func removeAll(realm: String) {
        entries.removeAll { _, list in list.contains { $0.token.realm.lowercased() == realm } }
    }

    package func removeAll(accountId: String) {
        entries.removeValue(for: accountId)
    }

    /// Whether any token of `accountId` is held; not a use (its recency is unchanged).
    package func holdsTokens(of accountId: String) -> Bool {
        entries.peek(accountId) != nil
    }

    /// Bytes and accounts held, and accounts dropped to make room (`/metrics`).
    package var usage: MemoryUsage { entries.usage }

    /// Tokens held.
    package var count: Int {
        var total = 0
        entries.forEach { _, list in total += list.count }
        return total
    }
}
