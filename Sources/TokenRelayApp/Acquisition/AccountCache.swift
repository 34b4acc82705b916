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

    private let entries = Mutex<[String: Entry]>([:])
    private let touches = Mutex<[String: Int]>([:])
    let ttl: TimeInterval

    init(ttl: TimeInterval = 30) {
        self.ttl = ttl
    }

    func account(id: String) -> AccountRecord? {
        entries.withLock { entries in
            guard let entry = entries[id] else { return nil }
            guard Date().timeIntervalSince(entry.storedAt) < ttl else {
                entries[id] = nil
                return nil
            }
            return entry.account
        }
    }

    func store(_ account: AccountRecord) {
        entries.withLock { $0[account.accountId] = Entry(account: account, storedAt: Date()) }
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

    func remove(id: String) {
        _ = entries.withLock { $0.removeValue(forKey: id) }
    }
}
