import Foundation
import Synchronization

/// The `Retry-After` answers this replica got from the STS or a downstream API, per request key,
/// until they end (SPEC §5 "Throttle memory", §12 Memories: per replica, short-lived): an
/// identical request in that window is answered at once, and the upstream sees nothing from this
/// replica before the time it asked for. As MSAL's throttling layer around the HTTP client
/// (msal-python `throttled_http_client.py`, MSAL.NET `ThrottlingManager`: "429 and 5xx with
/// Retry-After").
///
/// Bounded: at most `capacity` keys; when full, ended entries go first, then the ones ending
/// soonest (they matter least).
final class ThrottleMemory: Sendable {
    /// One remembered wait.
    struct Entry: Sendable, Equatable {
        /// When the upstream accepts requests again.
        let until: Date
        /// The upstream's status (429 or 503).
        let status: Int
    }

    /// Keys kept at most. Default 10,000.
    let capacity: Int
    private let entries = Mutex<[String: Entry]>([:])

    init(capacity: Int = 10_000) {
        self.capacity = max(1, capacity)
    }

    /// The key of an STS request: same client, authority, scopes and account (MSAL.NET's
    /// "strict thumbprint"); claims are left out, since throttling is about load.
    static func stsKey(clientId: String, authority: String, scopes: String, account: String) -> String {
        ["sts", clientId.lowercased(), authority.lowercased(), scopes.lowercased(), account].joined(separator: "|")
    }

    /// The key of a downstream call: the API, the identity the token is for, and the path
    /// (without query). Method and query are left out: a throttled resource is throttled for
    /// every way of asking, while other resources of the same API (other Graph workloads) keep
    /// working.
    static func downstreamKey(api: String, identity: String, path: String) -> String {
        ["downstream", api, identity, path.lowercased()].joined(separator: "|")
    }

    /// Remembers that `key` may not be sent again before `now + seconds`.
    /// - Parameters:
    ///   - seconds: the upstream's `Retry-After`, whole seconds; 0 or less remembers nothing.
    ///   - status: the upstream's status (429 or 503).
    func remember(_ key: String, seconds: Int, status: Int, now: Date = Date()) {
        guard seconds > 0 else { return }
        let entry = Entry(until: now.addingTimeInterval(Double(min(seconds, 86_400))), status: status)
        entries.withLock { entries in
            if let existing = entries[key], existing.until >= entry.until { return }  // never shortened
            if entries[key] == nil && entries.count >= capacity { evict(&entries, now: now) }
            entries[key] = entry
        }
    }

    /// The remembered wait for `key` while it lasts.
    /// - Returns: the entry and the whole seconds left (rounded up, at least 1); nil when none.
    func recall(_ key: String, now: Date = Date()) -> (entry: Entry, remainingSeconds: Int)? {
        entries.withLock { entries in
            guard let entry = entries[key] else { return nil }
            let left = entry.until.timeIntervalSince(now)
            guard left > 0 else {
                entries[key] = nil
                return nil
            }
            return (entry, max(1, Int(left.rounded(.up))))
        }
    }

    /// Keys currently held (ended ones included until evicted).
    var count: Int { entries.withLock { $0.count } }

    /// Makes room for one more: drops ended entries, or else the one ending soonest.
    private func evict(_ entries: inout [String: Entry], now: Date) {
        let before = entries.count
        entries = entries.filter { $0.value.until > now }
        guard entries.count == before, let soonest = entries.min(by: { $0.value.until < $1.value.until }) else { return }
        entries[soonest.key] = nil
    }
}
