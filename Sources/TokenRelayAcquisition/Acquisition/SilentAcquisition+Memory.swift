import IdentityCore
import TokenRelayBase
import TokenRelayStore

extension SilentAcquisition {
    /// Takes `plan` as far as this replica's memory goes, on the server thread (behaviour §10):
    /// nothing is written, nothing blocks, nothing suspends. Memory answers a cached token, the
    /// problem of an account whose refresh token is dead or whose tenant is suspended, or an
    /// interaction-required answer the UI-required memory replays (ADR 0008).
    /// - Parameter owner: the caller's key name, whose external ids memory may have resolved.
    /// - Returns: the answer, or nil when the plan needs PostgreSQL or the STS: `plan` then stands
    ///   at that step, for ``acquire(continuing:context:)`` to carry on.
    /// - Throws: `RelayError`: the plan's refusals memory alone decides.
    package func answerFromMemory(_ plan: inout SilentPlan, owner: String?) throws(RelayError) -> SilentTokenResult? {
        while true {
            switch plan.next() {
            case .resolveAccount:
                guard case .accountId(let id) = plan.request.account, let account = resolver.accountFromMemory(id, owner: owner) else { return nil }
                plan.learn(account: account, storedTokens: nil)
            case .checkSuspension(let account):
                plan.learn(suspendedTenant: suspensions.suspendedTenant(of: account))
            case .checkMemories:
                plan.learn(memoriesHoldUIRequired: uiRequired.count > 0, declinedScopes: declinedScopes.count > 0)
            case .lookUpMemoryCache(let lookup):
                plan.learn(memoryHit: memoryHit(lookup))
            case .recallDeclinedScopes(let accountId, let key):
                plan.learn(declined: declinedScopes.recall(accountId: accountId, key: key, now: plan.now))
            case .recallUIRequired(let accountId, let key):
                plan.learn(uiRequired: uiRequired.recall(accountId: accountId, key: key, now: plan.now))
            case .answer(let result, let after):
                carryOut(after, for: plan)
                return result
            case .refuse(let error, let after):
                carryOut(after, for: plan)
                throw error
            case .completeImport, .lookUpStoredCache, .refresh, .lookUpExtendedLifetime:
                // The plan asks the same again when the suspended step carries on.
                return nil
            }
        }
    }
}
