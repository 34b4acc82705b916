import Foundation
import Synchronization

/// Accounts this replica read recently, by `account_id`, so a cache hit needs no database
/// round trip (SPEC §10). Entries live `ttl` seconds (SPEC §12: `TOKENRELAY_CACHE_TTL_S`, the
/// bound on cross-replica staleness when no notification arrives) and are dropped at once when
/// this replica deletes, re-signs-in or marks the account.
final class AccountCache: Sendable {
    private struct Entry {
        let account: AccountRecord
        let storedAt: Date
    }

    private struct State {
        var entries: [String: Entry] = [:]
        /// Removals are numbered; a read that began before an account's last removal is not stored.
        var removals: UInt64 = 0
        var removedAt: [String: UInt64] = [:]
        /// The removal number of the last ``AccountCache/removeAll()``.
        var clearedAt: UInt64 = 0
    }

    private let state = Mutex(State())
    private let touches = Mutex<[String: Int]>([:])
    let ttl: TimeInterval

    init(ttl: TimeInterval = 30) {
        self.ttl = ttl
    }

    func account(id: String) -> AccountRecord? {
        state.withLock { state in
            guard let entry = state.entries[id] else { return nil }
            guard Date().timeIntervalSince(entry.storedAt) < ttl else {
                state.entries[id] = nil
                return nil
            }
            return entry.account
        }
    }

    /// Taken before reading an account from the database, and handed to `store`.
    var readMark: UInt64 { state.withLock { $0.removals } }

    /// Stores `account` unless this replica removed it after `readMark` was taken (a read racing a
    /// deletion must not bring the account back).
    func store(_ account: AccountRecord, readMark: UInt64) {
        state.withLock { state in
            if let removed = state.removedAt[account.accountId], removed > readMark { return }
            if state.clearedAt > readMark { return }
            state.entries[account.accountId] = Entry(account: account, storedAt: Date())
        }
    }

    /// True at most once per `touchInterval` seconds per account in this replica: the caller then
    /// writes `last_used_at` (SPEC §12: at most once per 5 minutes, never a write per request).
    func claimTouch(id: String, now: Int) -> Bool {
        touches.withLock { touches in
            if let last = touches[id], now - last < Self.touchInterval { return false }
            touches[id] = now
            return true
        }
    }

    static let touchInterval = 300

    /// Drops every entry (invalidation notifications may have been missed); reads in flight are
    /// not stored afterwards.
    func removeAll() {
        state.withLock { state in
            state.removals += 1
            state.entries.removeAll()
            state.removedAt.removeAll()
            state.clearedAt = state.removals
        }
    }

    func remove(id: String) {
        state.withLock { state in
            state.entries[id] = nil
            state.removals += 1
            // Only reads in flight need the mark; an old one can go when the table grows.
            if state.removedAt.count >= 10_000 { state.removedAt.removeAll() }
            state.removedAt[id] = state.removals
        }
    }
}
