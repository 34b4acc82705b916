import Foundation
import TokenRelayBase

/// The `Retry-After` answers this replica got from the STS or a downstream API, per request key,
/// until they end (behaviour §5 "Throttle memory", §12 Memories: per replica, short-lived): an
/// identical request in that window is answered at once, and the upstream sees nothing from this
/// replica before the time it asked for. As MSAL's throttling layer around the HTTP client
/// (msal-python `throttled_http_client.py`, MSAL.NET `ThrottlingManager`: "429 and 5xx with
/// Retry-After").
///
/// Bounded: at most `capacity` keys; when full, ended entries go first, then the ones ending
/// soonest (they matter least): ``ExpiringMap``.
package final class ThrottleMemory: Sendable {
    /// One remembered wait.
    package struct Entry: Sendable, Equatable {
        /// When the upstream accepts requests again.
        package let until: Date
        /// The upstream's status (429 or 503).
        package let status: Int
    }

    /// Keys kept at most. Default 10,000.
    package let capacity: Int
    /// On `Date.timeIntervalSinceReferenceDate`, Date's own timeline: a wait ends to the
    /// sub-second, as `Retry-After` counted from the answer's arrival.
    private let entries: ExpiringMap<Key, Entry>

    package init(capacity: Int = 10_000) {
        self.capacity = max(1, capacity)
        entries = ExpiringMap(capacity: self.capacity)
    }

    /// What makes two requests identical for the memory, and the account they are for, if any:
    /// a new sign-in for the account forgets its entries (behaviour §12, ``forget(accountId:)``).
    package struct Key: Hashable, Sendable, ExpressibleByStringLiteral {
        package let text: String
        /// The account id the request is for; nil for the app itself, an on-behalf-of assertion
        /// or an authorization code (nothing a sign-in clears).
        package let accountId: String?

        package init(_ text: String, accountId: String? = nil) {
            self.text = text
            self.accountId = accountId
        }

        package init(stringLiteral text: String) { self.init(text) }
    }

    /// The key of an STS request for an account (a refresh-token redemption): same client,
    /// authority, scopes and account (MSAL.NET's "strict thumbprint"); claims are left out, since
    /// throttling is about load.
    package static func stsKey(clientId: String, authority: String, scopes: String, account: String) -> Key {
        Key(stsText(clientId: clientId, authority: authority, scopes: scopes, owner: account), accountId: account)
    }

    /// The key of an STS request for no account (client credentials, on-behalf-of, an
    /// authorization code): `grantDigest` stands for whose grant it is.
    package static func stsKey(clientId: String, authority: String, scopes: String, grantDigest: String) -> Key {
        Key(stsText(clientId: clientId, authority: authority, scopes: scopes, owner: grantDigest))
    }

    private static func stsText(clientId: String, authority: String, scopes: String, owner: String) -> String {
        ["sts", clientId.lowercased(), authority.lowercased(), scopes.lowercased(), owner].joined(separator: "|")
    }

    /// The key of a downstream call: the API, the identity the token is for, and the path
    /// (without query). Method and query are left out: a throttled resource is throttled for
    /// every way of asking, while other resources of the same API (other Graph workloads) keep
    /// working.
    /// - Parameter accountId: the account when the identity is one (`X-Account-Id`); nil for the
    ///   app and on-behalf-of identities.
    package static func downstreamKey(api: String, identity: String, path: String, accountId: String? = nil) -> Key {
        Key(["downstream", api, identity, path.lowercased()].joined(separator: "|"), accountId: accountId)
    }

    /// Remembers that `key` may not be sent again before `now + seconds`; a longer wait already
    /// remembered stays (never shortened).
    /// - Parameters:
    ///   - seconds: the upstream's `Retry-After`, whole seconds (at most a day is kept); 0 or less
    ///     remembers nothing.
    ///   - status: the upstream's status (429 or 503).
    package func remember(_ key: Key, seconds: Int, status: Int, now: Date) {
        guard seconds > 0 else { return }
        let until = now.addingTimeInterval(Double(min(seconds, 86_400)))
        entries.update(key, now: now.timeIntervalSinceReferenceDate) { held in
            if let held, held.value.until >= until { return }
            held = .init(value: Entry(until: until, status: status), expiresAt: until.timeIntervalSinceReferenceDate)
        }
    }

    /// The remembered wait for `key` while it lasts.
    /// - Returns: the entry and the whole seconds left (rounded up, at least 1); nil when none.
    package func recall(_ key: Key, now: Date) -> (entry: Entry, remainingSeconds: Int)? {
        guard let entry = entries.value(for: key, now: now.timeIntervalSinceReferenceDate) else { return nil }
        return (entry, max(1, Int(entry.until.timeIntervalSince(now).rounded(.up))))
    }

    /// Forgets every wait remembered for the account's requests (STS redemptions of its refresh
    /// token, downstream calls as the account): a new sign-in, a deletion or a dead refresh token
    /// (behaviour §12 Memories and replicas). Entries of the app and on-behalf-of stay.
    package func forget(accountId: String) {
        entries.removeAll { key, _ in key.accountId == accountId }
    }

    /// Keys currently held (ended ones included until evicted).
    package var count: Int { entries.count }
}
