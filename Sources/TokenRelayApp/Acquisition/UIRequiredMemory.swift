import Synchronization

/// Interaction-required answers this replica got from the STS, replayed without asking it again
/// (SPEC §2 step 1, §5 "UI-required memory", as MSAL's UI-required cache does).
///
/// Keyed by (account, realm, scopes, claims): an MFA, consent or conditional-access demand for one
/// resource does not stop other resources. Per replica and short-lived (`ttlSeconds`,
/// `TOKENRELAY_UI_REQUIRED_TTL_S`, default 60); bounded to `capacity` answers (the soonest to
/// expire go first); an account's answers are forgotten when it signs in again (`forget`).
final class UIRequiredMemory: Sendable {
    private struct Entry {
        let problem: Problem
        /// Unix seconds.
        let expiresAt: Int
    }

    private struct State {
        var byAccount: [String: [String: Entry]] = [:]
        var count = 0
    }

    /// How long an answer is replayed (seconds); 0 turns the memory off.
    let ttlSeconds: Int
    /// Most answers held at once.
    let capacity: Int
    private let state = Mutex(State())

    init(ttlSeconds: Int = 60, capacity: Int = 10_000) {
        self.ttlSeconds = ttlSeconds
        self.capacity = max(1, capacity)
    }

    /// The key of one request: realm, scopes and the claims sent (merged with capabilities).
    static func key(realm: String, scopesKey: String, claims: String?) -> String {
        realm + "|" + scopesKey + "|" + (claims ?? "")
    }

    /// Remembers `problem` for `ttlSeconds` from `now` (unix seconds).
    func remember(_ problem: Problem, accountId: String, key: String, now: Int) {
        guard ttlSeconds > 0 else { return }
        state.withLock { state in
            if state.byAccount[accountId]?[key] == nil {
                if state.count >= capacity { Self.makeRoom(&state, now: now) }
                state.count += 1
            }
            state.byAccount[accountId, default: [:]][key] = Entry(problem: problem, expiresAt: now + ttlSeconds)
        }
    }

    /// The remembered answer while it has not expired.
    func recall(accountId: String, key: String, now: Int) -> Problem? {
        state.withLock { state in
            guard let entry = state.byAccount[accountId]?[key] else { return nil }
            guard entry.expiresAt > now else {
                state.byAccount[accountId]?[key] = nil
                if state.byAccount[accountId]?.isEmpty == true { state.byAccount[accountId] = nil }
                state.count -= 1
                return nil
            }
            return entry.problem
        }
    }

    /// Forgets an account's answers: a new sign-in (here, or announced by another replica),
    /// deletion, dead refresh token.
    func forget(accountId: String) {
        state.withLock { state in
            if let removed = state.byAccount.removeValue(forKey: accountId) { state.count -= removed.count }
        }
    }

    /// Answers held now.
    var count: Int { state.withLock { $0.count } }

    /// Drops expired answers; when none had expired, the one closest to expiry.
    private static func makeRoom(_ state: inout State, now: Int) {
        var removed = 0
        for (account, entries) in state.byAccount {
            let kept = entries.filter { $0.value.expiresAt > now }
            removed += entries.count - kept.count
            state.byAccount[account] = kept.isEmpty ? nil : kept
        }
        state.count -= removed
        guard removed == 0 else { return }
        var oldest: (account: String, key: String, expiresAt: Int)?
        for (account, entries) in state.byAccount {
            for (key, entry) in entries where oldest == nil || entry.expiresAt < oldest!.expiresAt {
                oldest = (account, key, entry.expiresAt)
            }
        }
        if let oldest {
            state.byAccount[oldest.account]?[oldest.key] = nil
            if state.byAccount[oldest.account]?.isEmpty == true { state.byAccount[oldest.account] = nil }
            state.count -= 1
        }
    }
}
