import TokenRelayBase

/// Interaction-required answers this replica got from the STS, replayed without asking it again
/// (behaviour §2.2, §5 "UI-required memory", as MSAL's UI-required cache does).
///
/// Keyed by (account, realm, scopes, claims): an MFA, consent or conditional-access demand for one
/// resource does not stop other resources. Per replica and short-lived (`ttlSeconds`,
/// `TOKENRELAY_UI_REQUIRED_TTL_S`, default 60); bounded to `capacity` answers (expired ones go
/// first, then the soonest to expire, which with one TTL is the oldest: ``ExpiringMap``); an
/// account's answers are forgotten when it signs in again (`forget`).
package final class UIRequiredMemory: Sendable {
    private struct Key: Hashable, Sendable {
        let accountId: String
        let request: String
    }

    /// How long an answer is replayed (seconds); 0 turns the memory off.
    package let ttlSeconds: Int
    /// Most answers held at once.
    package let capacity: Int
    private let answers: ExpiringMap<Key, RelayError>
    /// When the last answer remembered expires (``mayHold(now:)``).
    private let latestExpiry = LatestExpiry()

    package init(ttlSeconds: Int = 60, capacity: Int = 10_000) {
        self.ttlSeconds = ttlSeconds
        self.capacity = max(1, capacity)
        answers = ExpiringMap(capacity: self.capacity)
    }

    /// The key of one request: realm, scopes and the claims sent (merged with capabilities).
    package static func key(realm: String, scopesKey: String, claims: String?) -> String {
        realm + "|" + scopesKey + "|" + (claims ?? "")
    }

    /// Remembers `problem` for `ttlSeconds` from `now` (unix seconds).
    package func remember(_ problem: RelayError, accountId: String, key: String, now: Int) {
        guard ttlSeconds > 0 else { return }
        latestExpiry.note(now + ttlSeconds)
        answers.set(problem, for: Key(accountId: accountId, request: key), expiresAt: Double(now + ttlSeconds), now: Double(now))
    }

    /// The remembered answer while it has not expired (`now` in unix seconds).
    package func recall(accountId: String, key: String, now: Int) -> RelayError? {
        answers.value(for: Key(accountId: accountId, request: key), now: Double(now))
    }

    /// Forgets an account's answers: a new sign-in (here, or announced by another replica),
    /// deletion, dead refresh token.
    /// - Complexity: O(n) in the answers held; it runs per sign-in or deletion, not per request.
    package func forget(accountId: String) {
        answers.removeAll { key, _ in key.accountId == accountId }
    }

    /// Answers held now.
    /// Whether any answer may still be held at `now` (unix seconds): false means none is, without
    /// a lookup (the silent plan skips the memory then). True may be stale after ``forget(accountId:)``;
    /// ``recall(accountId:key:now:)`` tells.
    package func mayHold(now: Int) -> Bool { latestExpiry.mayHold(now: now) }

    package var count: Int { answers.count }
}
