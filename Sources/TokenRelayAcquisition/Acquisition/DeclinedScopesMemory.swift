import Foundation
import IdentityCore
import TokenRelayBase
import TokenRelayStore

/// Declined-scopes answers this replica got, per (account, realm, requested scope set), kept until
/// the token's `expires_on` (behaviour §12 Token requests): a repeat of the same request answers the
/// same (409, or 200 with `allow_partial`) without asking the STS again. Without it, a token
/// cached under its granted scopes never matches the wider request, and every repeat redeems the
/// refresh token (case 16).
package final class DeclinedScopesMemory: Sendable {
    package struct Answer: Sendable {
        package let token: StoredAccessToken
        package let declined: [String]

        package init(token: StoredAccessToken, declined: [String]) {
            self.token = token
            self.declined = declined
        }
    }

    private struct Key: Hashable, Sendable {
        let accountId: String
        let request: String
    }

    private let answers: ExpiringMap<Key, Answer>

    /// When the last answer remembered expires (``mayHold(now:)``).
    private let latestExpiry = LatestExpiry()
    /// Most answers kept: callers choose the scope sets, so the memory must not grow with them.
    package let limit: Int

    /// - Parameter limit: most answers kept (default 10,000); when full, expired answers go first,
    ///   and a new answer is not remembered if none has expired (the STS is asked again): an
    ///   answer already held keeps saving a redemption until its token expires, however many
    ///   new scope sets callers try.
    package init(limit: Int = 10_000) {
        self.limit = limit
        answers = ExpiringMap(capacity: limit, whenFull: .keepExisting)
    }

    package static func key(realm: String, scopes: ScopeSet) -> String { realm + "|" + scopes.cacheKey }

    /// Number of answers held (tests, metrics).
    /// Whether any answer may still be held at `now` (unix seconds): false means none is, without
    /// a lookup (the silent plan skips the memory then). True may be stale after ``forget(accountId:)``;
    /// ``recall(accountId:key:now:)`` tells.
    package func mayHold(now: Int) -> Bool { latestExpiry.mayHold(now: now) }

    package var count: Int { answers.count }

    /// Remembers `answer` until its token's `expires_on` (`now` in unix seconds).
    package func remember(_ answer: Answer, accountId: String, key: String, now: Int) {
        latestExpiry.note(answer.token.expiresOn)
        answers.set(answer, for: Key(accountId: accountId, request: key), expiresAt: Double(answer.token.expiresOn), now: Double(now))
    }

    /// The remembered answer while its token has not expired (`now` in unix seconds).
    package func recall(accountId: String, key: String, now: Int) -> Answer? {
        answers.value(for: Key(accountId: accountId, request: key), now: Double(now))
    }

    /// Forgets an account's answers (new sign-in, deletion, dead refresh token).
    /// - Complexity: O(n) in the answers held; it runs per sign-in or deletion, not per request.
    package func forget(accountId: String) {
        answers.removeAll { key, _ in key.accountId == accountId }
    }
}
