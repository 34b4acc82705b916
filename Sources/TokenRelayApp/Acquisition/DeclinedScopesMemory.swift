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

    private let answers = Mutex<[String: [String: Answer]]>([:])  // account id → key → answer

    static func key(realm: String, scopes: ScopeSet) -> String { realm + "|" + scopes.cacheKey }

    func remember(_ answer: Answer, accountId: String, key: String) {
        answers.withLock { $0[accountId, default: [:]][key] = answer }
    }

    /// The remembered answer while its token has not expired (`now` in unix seconds).
    func recall(accountId: String, key: String, now: Int) -> Answer? {
        answers.withLock { answers in
            guard let answer = answers[accountId]?[key] else { return nil }
            guard answer.token.expiresOn > now else {
                answers[accountId]?[key] = nil
                return nil
            }
            return answer
        }
    }

    /// Forgets an account's answers (new sign-in, deletion, dead refresh token).
    func forget(accountId: String) {
        _ = answers.withLock { $0.removeValue(forKey: accountId) }
    }
}
