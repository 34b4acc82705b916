import Foundation
import IdentityCore
import Synchronization

/// Declined-scopes answers this replica got, per (account, realm, requested scope set), kept until
/// the token's `expires_on` (SPEC §12 Token requests): a repeat of the same request answers the
/// same (409, or 200 with `allow_partial`) without asking the STS again. Without it, a token
/// cached under its granted scopes never matches the wider request, and every repeat redeems the
/// refresh token (case 16).
final class DeclinedScopesMemory: Sendable {
    struct Answer: Sendable {
        let token: StoredAccessToken
        let declined: [String]
    }

    private let answers = Mutex<(entries: [String: [String: Answer]], count: Int)>(([:], 0))  // account id → key → answer
    /// Most answers kept: callers choose the scope sets, so the memory must not grow with them.
    let limit: Int

    /// - Parameter limit: most answers kept (default 10,000); when full, expired answers go first,
    ///   and a new answer is not remembered if none has expired (the STS is asked again).
    init(limit: Int = 10_000) { self.limit = limit }

    static func key(realm: String, scopes: ScopeSet) -> String { realm + "|" + scopes.cacheKey }

    /// Number of answers held (tests, metrics).
    var count: Int { answers.withLock { $0.count } }

    func remember(_ answer: Answer, accountId: String, key: String, now: Int = Int(Date().timeIntervalSince1970)) {
        answers.withLock { state in
            let replacing = state.entries[accountId]?[key] != nil
            if !replacing && state.count >= limit {
                for (account, keys) in state.entries {
                    let live = keys.filter { $0.value.token.expiresOn > now }
                    state.count -= keys.count - live.count
                    state.entries[account] = live.isEmpty ? nil : live
                }
                guard state.count < limit else { return }
            }
            state.entries[accountId, default: [:]][key] = answer
            if !replacing { state.count += 1 }
        }
    }

    /// The remembered answer while its token has not expired (`now` in unix seconds).
    func recall(accountId: String, key: String, now: Int) -> Answer? {
        answers.withLock { state in
            guard let answer = state.entries[accountId]?[key] else { return nil }
            guard answer.token.expiresOn > now else {
                state.entries[accountId]?[key] = nil
                state.count -= 1
                return nil
            }
            return answer
        }
    }

    /// Forgets an account's answers (new sign-in, deletion, dead refresh token).
    func forget(accountId: String) {
        answers.withLock { state in
            if let removed = state.entries.removeValue(forKey: accountId) { state.count -= removed.count }
        }
    }
}
