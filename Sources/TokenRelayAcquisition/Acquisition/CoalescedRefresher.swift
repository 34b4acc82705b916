import Foundation
import IdentityCore
import TokenRelayBase

/// Joins concurrent refreshes of the same (account, realm, scopes, claims, mode, min_ttl) into
/// one run of the ``RefreshExecutor`` per replica (behaviour §2.6, §10 coalescing); replicas
/// agree through the executor's lease.
package struct CoalescedRefresher: Sendable {
    package let executor: RefreshExecutor

    package init(executor: RefreshExecutor) {
        self.executor = executor
        coalescer = RefreshCoalescer(tasks: executor.tasks)
        imports = RefreshCoalescer(tasks: executor.tasks)
    }
    package let coalescer: RefreshCoalescer<RefreshExecutor.Outcome>
    /// The first redemptions of imported accounts (``SilentAcquisition/completeImport(_:request:context:)``),
    /// run the same way: one per (account, scopes, claims), each caller waiting until its own deadline.
    package let imports: RefreshCoalescer<SilentTokenResult?>

    /// The coalescing key of `request`.
    package static func key(_ request: RefreshExecutor.Request) -> String {
        key(
            accountId: request.account.accountId, realm: request.realm, scopes: request.scopes, claims: request.claims, mode: request.mode,
            minTTL: request.minTTL)
    }

    package static func key(accountId: String, realm: String, scopes: ScopeSet, claims: String?, mode: RefreshStateMachine.Mode, minTTL: Int) -> String {
        [accountId, realm, scopes.cacheKey, claims ?? "", mode.rawValue, String(minTTL)].joined(separator: "|")
    }

    /// Whether a refresh with this key is running in this replica.
    package func isRunning(_ key: String) -> Bool { coalescer.isRunning(key) }

    /// Runs `request`, or joins the same refresh already running.
    /// - Parameter deadline: this caller stops waiting then (504) while the refresh runs on, so
    ///   what it stores (a rotated refresh token) is not lost. Nil: wait to the end.
    /// - Returns: the outcome and whether this call joined one in flight.
    package func run(_ request: RefreshExecutor.Request, until deadline: Date?) async throws -> (RefreshExecutor.Outcome, joined: Bool) {
        let executor = self.executor
        let (outcome, joined) = try await coalescer.run(key: Self.key(request), until: deadline) { try await executor.run(request) }
        if joined { executor.metrics.increment("tokenrelay_refresh_coalesced_total") }
        return (outcome, joined)
    }
}
