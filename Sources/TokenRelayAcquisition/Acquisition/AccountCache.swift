import Foundation
import Synchronization
import TokenRelayBase
import TokenRelayStore

/// Accounts this replica read recently, by `account_id`, so a cache hit needs no database
/// round trip (behaviour §10). Entries live `ttl` seconds (behaviour §12: `TOKENRELAY_CACHE_TTL_S`, the
/// bound on cross-replica staleness when no notification arrives) and are dropped at once when
/// this replica deletes, re-signs-in or marks the account. At most `capacityBytes` are held,
/// counted by what each account really holds (``AccountRecord/memoryCost``), the least recently
/// used out first (``ByteBoundedLRU``); a miss costs one database read.
///
/// It also remembers which account an external id named (behaviour §3.7), for as long as
/// accounts. Such an entry is believed only while the account it points to is held here
/// and still has that external id: every change of an account's external ids re-reads or
/// forgets the account (sign-in, import, merge and deletion notify every replica), so a stale
/// entry is never served.
package final class AccountCache: Sendable {
    private struct Marks {
        /// Removals are numbered; a read that began before an account's last removal is not stored.
        var removals: UInt64 = 0
        var removedAt: [String: UInt64] = [:]
        /// The removal number of the last ``AccountCache/removeAll()``.
        var clearedAt: UInt64 = 0
    }

    /// Taken before `entries`' lock whenever both are (`store`, `remove`, `removeAll`), so that a
    /// read racing a removal cannot store after it.
    private let marks = Mutex(Marks())
    private struct Held: Sendable {
        let account: AccountRecord
        /// Unix seconds.
        let expiresAt: Double
        /// Unix seconds of the last `last_used_at` write this replica claimed for the account
        /// (``claimTouch(id:now:)``); carried over when the account is read again. Kept in the
        /// entry so that touch times are bounded by the same bytes as the accounts (issue 13: a
        /// separate map of up to 100,000 times sat outside `TOKENRELAY_MEMORY_CACHE_MB`).
        var touchedAt: Int?
    }

    private let entries: ByteBoundedLRU<String, Held>

    /// Bytes counted per account on top of ``AccountRecord/memoryCost``: its slot and index bucket.
    package static var entryOverheadBytes: Int { ByteBoundedLRU<String, Held>.entryOverheadBytes }
    /// (owner, external id) → the account id it named when last read from the database.
    private let externalIds: ExpiringMap<ExternalId, String>
    /// Seconds an entry is served.
    package let ttl: TimeInterval
    /// The clock entries expire on (its Unix time; a manual one in tests).
    private let clock: RelayClock

    /// - Parameters:
    ///   - ttl: `TOKENRELAY_CACHE_TTL_S`, seconds an account is served from memory. Default 30.
    ///   - capacityBytes: most bytes of accounts held (`TOKENRELAY_MEMORY_CACHE_MB`'s share for
    ///     accounts). Default 16 MiB.
    ///   - externalIdCapacity: most external ids remembered (about 100 bytes each). Default 100,000.
    ///   - clock: the service's clock. Default the system's.
    package init(ttl: TimeInterval = 30, capacityBytes: Int = 16 << 20, externalIdCapacity: Int = 100_000, clock: RelayClock = .system) {
        self.ttl = ttl
        self.clock = clock
        entries = ByteBoundedLRU(capacityBytes: capacityBytes)
        externalIds = ExpiringMap(capacity: externalIdCapacity)
    }

    /// The account, while its entry is younger than `ttl`. An expired entry is not served but
    /// stays until the account is read again (``store(_:readMark:)`` keeps its touch time) or
    /// the least recently used go.
    package func account(id: String) -> AccountRecord? {
        guard let held = entries.value(for: id), held.expiresAt > clock.unixTime else { return nil }
        return held.account
    }

    /// ``account(id:)``, and whether a touch of it is due at `now` (Unix seconds): false while
    /// this replica claimed one less than ``touchInterval`` ago. Read with the account, so a
    /// cached answer looks the account up once (behaviour §10); ``claimTouch(id:now:)`` stays the claim.
    package func accountAndTouchDue(id: String, now: Int) -> (account: AccountRecord, touchDue: Bool)? {
        guard let held = entries.value(for: id), held.expiresAt > clock.unixTime else { return nil }
        return (held.account, Self.touchDue(lastClaimed: held.touchedAt, now: now))
    }

    private static func touchDue(lastClaimed: Int?, now: Int) -> Bool {
        lastClaimed.map { now >= $0 + touchInterval } ?? true
    }

    /// Bytes and accounts held, and accounts dropped to make room (`/metrics`).
    package var usage: MemoryUsage { entries.usage }

    /// The account `externalId` names, from memory: held here and still carrying that external id.
    package func account(externalId: ExternalId) -> AccountRecord? {
        guard let accountId = externalIds.value(for: externalId, now: clock.unixTime), let account = account(id: accountId),
            account.externalIds[externalId.owner] == externalId.value
        else { return nil }
        return account
    }

    /// Remembers that `externalId` named `account` (just read from the database) for `ttl`
    /// seconds; nothing when the account does not carry it.
    package func remember(_ externalId: ExternalId, of account: AccountRecord) {
        guard account.externalIds[externalId.owner] == externalId.value else { return }
        let now = self.clock.unixTime
        _ = externalIds.set(account.accountId, for: externalId, expiresAt: now + ttl, now: now)
    }

    /// Taken before reading an account from the database, and handed to `store`.
    package var readMark: UInt64 { marks.withLock { $0.removals } }

    /// Stores `account` unless this replica removed it after `readMark` was taken (a read racing a
    /// deletion must not bring the account back).
    package func store(_ account: AccountRecord, readMark: UInt64) {
        // Walks the claims' tree: done before taking the locks every request path shares.
        let cost = account.memoryCost
        marks.withLock { marks in
            if let removed = marks.removedAt[account.accountId], removed > readMark { return }
            if marks.clearedAt > readMark { return }
            let expiresAt = clock.unixTime + ttl
            entries.update(account.accountId) { held in
                held = (Held(account: account, expiresAt: expiresAt, touchedAt: held?.value.touchedAt), cost)
            }
        }
    }

    /// True at most once per `touchInterval` seconds per account held here: the caller then
    /// writes `last_used_at` (behaviour §12: at most once per 5 minutes, never a write per request).
    /// The time lives in the account's entry, so an account memory no longer holds (dropped to
    /// make room, removed) is claimed again: its `UPDATE` changes no row within the interval
    /// (``TokenStore/touch(accountId:)`` has the same condition).
    package func claimTouch(id: String, now: Int) -> Bool {
        let claimed = entries.modify(id) { held in
            guard Self.touchDue(lastClaimed: held.touchedAt, now: now) else { return false }
            held.touchedAt = now
            return true
        }
        return claimed ?? true
    }

    package static let touchInterval = 300

    /// Drops every entry (invalidation notifications may have been missed); reads in flight are
    /// not stored afterwards.
    package func removeAll() {
        marks.withLock { marks in
            marks.removals += 1
            entries.removeAll()
            externalIds.removeAll()
            marks.removedAt.removeAll()
            marks.clearedAt = marks.removals
        }
    }

    /// The ids of the accounts held that are of `tenantId` (lower-cased; ``AccountRecord/tenantIds``),
    /// expired entries included: a suspension forgets them all.
    /// - Complexity: O(accounts held).
    package func accountIds(ofTenant tenantId: String) -> [String] {
        var ids: [String] = []
        entries.forEach { id, held in if held.account.tenantIds.contains(tenantId) { ids.append(id) } }
        return ids
    }

    package func remove(id: String) {
        marks.withLock { marks in
            entries.removeValue(for: id)
            marks.removals += 1
            // Only reads in flight need the mark; an old one can go when the table grows.
            if marks.removedAt.count >= 10_000 { marks.removedAt.removeAll() }
            marks.removedAt[id] = marks.removals
        }
    }
}

extension AccountRecord {
    /// Heap bytes an account holds in memory (``HeapCost``): its fields object, its strings, the id token's claims as
    /// text and parsed, its JSON answer bytes, tenant profiles and external ids. Its own fields
    /// are in the cache's slot (``AccountCache/entryOverheadBytes``).
    package var memoryCost: Int {
        let strings =
            [accountId, clientId, environment, realm, authority, createdAt, idTokenClaims].reduce(0) { $0 + HeapCost.string($1) }
            + [homeAccountId, localAccountId, username, name, lastUsedAt, unconfirmedImporter].reduce(0) { $0 + HeapCost.string($1) }
        let profiles = tenantProfiles.reduce(HeapCost.array(tenantProfiles)) { $0 + HeapCost.string($1.realm) + HeapCost.string($1.localAccountId) }
        let external = externalIds.reduce(HeapCost.hashTable(count: externalIds.count, stride: 2 * MemoryLayout<String>.stride)) {
            $0 + HeapCost.string($1.key) + HeapCost.string($1.value)
        }
        return AccountRecord.Fields.objectCost + strings + HeapCost.json(claims) + HeapCost.array(jsonBytes) + profiles + external
    }
}
