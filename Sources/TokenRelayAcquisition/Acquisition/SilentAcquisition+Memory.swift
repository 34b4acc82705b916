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
        // Whether the answer records use of the account (read with it; the claim is made only then).
        var touchDue = true
        while true {
            switch plan.next() {
            case .resolveAccount:
                guard case .accountId(let id) = plan.request.account, let (account, due) = resolver.accountFromMemory(id, owner: owner, now: plan.now)
                else { return nil }
                touchDue = due
                plan.learn(account: account, storedTokens: nil)
                // The two facts the plan asks memory for next, told at once: each `next()` walks
                // the plan from its top (about 500 instructions of a cached answer, behaviour §10),
                // and both are reads without effects, unused if the plan refuses first.
                plan.learn(suspendedTenant: suspensions.suspendedTenant(of: account))
                plan.learn(memoriesHoldUIRequired: uiRequired.mayHold(now: plan.now), declinedScopes: declinedScopes.mayHold(now: plan.now))
            case .checkSuspension:
                plan.learn(suspendedTenant: suspensions.suspendedTenant(of: plan.account!))
            case .checkMemories:
                plan.learn(memoriesHoldUIRequired: uiRequired.mayHold(now: plan.now), declinedScopes: declinedScopes.mayHold(now: plan.now))
            case .lookUpMemoryCache:
                plan.learn(memoryHit: memoryHit(plan.lookup))
            case .recallDeclinedScopes:
                plan.learn(declined: declinedScopes.recall(accountId: plan.account!.accountId, key: plan.recallKey, now: plan.now))
            case .recallUIRequired:
                plan.learn(uiRequired: uiRequired.recall(accountId: plan.account!.accountId, key: plan.recallKey, now: plan.now))
            case .answer:
                carryOut(plan.aftermath, for: plan, touchDue: touchDue)
                return plan.takeAnswer()
            case .refuse:
                carryOut(plan.aftermath, for: plan, touchDue: touchDue)
                throw plan.refusal!
            case .completeImport, .lookUpStoredCache, .refresh, .lookUpExtendedLifetime:
                // The plan asks the same again when the suspended step carries on.
                return nil
            }
        }
    }
}
