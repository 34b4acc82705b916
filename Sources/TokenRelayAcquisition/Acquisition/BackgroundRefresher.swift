import Foundation
import IdentityCore
import TokenRelayBase
import TokenRelayStore
import TokenRelayUpstream

/// Refreshes no caller waits for: one proactive refresh once a served token's `refresh_on` has
/// passed (behaviour §1; the cached token is served meanwhile), and the keep-alive redemptions of
/// idle accounts (`KeepAliveJob`). Both are the normal refresh, through the same coalescing and
/// lease as a caller's. A proactive refresh runs in a task of ``tasks`` (skipped when it is full
/// or stopping: the next cache hit past `refresh_on` asks again).
package struct BackgroundRefresher: Sendable {
    package let refresher: CoalescedRefresher
    package let authorities: AuthorityValidator
    package let memory: MemoryTokenCache
    package let clientCapabilities: [String]
    package let logger: Logger
    package let now: @Sendable () -> Int
    /// Drops what this replica holds of an account whose refresh token died.
    package let forget: @Sendable (String) -> Void
    /// The owner of work no request awaits (the refresher's).
    package var tasks: BackgroundTasks { refresher.executor.tasks }

    package init(
        refresher: CoalescedRefresher, authorities: AuthorityValidator, memory: MemoryTokenCache, clientCapabilities: [String], logger: Logger,
        now: @escaping @Sendable () -> Int, forget: @escaping @Sendable (String) -> Void
    ) {
        self.refresher = refresher
        self.authorities = authorities
        self.memory = memory
        self.clientCapabilities = clientCapabilities
        self.logger = logger
        self.now = now
        self.forget = forget
    }

    /// Starts one background refresh of the served token's scopes unless one is running.
    /// - Parameters:
    ///   - authority: the request's authority; nil means the account's own.
    ///   - claims: the merged claims the request used; nil means the client capabilities alone
    ///     (the server-thread path has merged none yet), so both paths build the same key.
    package func refreshSoon(_ token: StoredAccessToken, account: AccountRecord, scopes: ScopeSet, authority: Authority?, claims: String?) {
        let claims = claims ?? (try? ClaimsRequest.merged(claims: nil, capabilities: clientCapabilities)) ?? nil
        let key = CoalescedRefresher.key(accountId: account.accountId, realm: token.realm, scopes: scopes, claims: claims, mode: .proactive, minTTL: 0)
        guard !refresher.isRunning(key) else { return }
        let background = self
        tasks.startIfRoom {
            guard let authority = try? authority ?? background.authorities.validate(account.authority) else { return }
            let context = RequestContext.background(seconds: 30)
            let request = RefreshExecutor.Request(
                account: account, authority: authority, realm: token.realm, scopes: scopes, claims: claims, mode: .proactive, minTTL: 0,
                context: context)
            do {
                let (outcome, _) = try await background.refresher.run(request, until: nil)
                if case .failure(let error) = outcome {
                    background.logger.info("token.proactive_refresh_failed", ["account.id": account.accountId, "error": error.code.rawValue])
                }
                background.absorb(outcome, accountId: account.accountId)
            } catch {
                background.logger.warn("token.proactive_refresh_failed", ["account.id": account.accountId, "error": String(describing: type(of: error))])
            }
        }
    }

    /// One keep-alive redemption (behaviour §12 Time in tests): the normal refresh in the account's
    /// home realm, bypassing the cache, without marking the account used.
    /// - Returns: the refresh outcome (a token, or the error a request would have seen).
    /// - Throws: `RelayError` when the account's authority is no longer accepted, or the database fails.
    package func keepAlive(account: AccountRecord, scopes: ScopeSet, context: RequestContext) async throws -> RefreshExecutor.Outcome {
        let (authority, realm) = try authorities.authorityAndRealm(nil, for: account)
        let claims = (try? ClaimsRequest.merged(claims: nil, capabilities: clientCapabilities)) ?? nil
        let request = RefreshExecutor.Request(
            account: account, authority: authority, realm: realm, scopes: scopes, claims: claims, mode: .bypass, minTTL: 0, context: context)
        let (outcome, _) = try await refresher.run(request, until: nil)
        absorb(outcome, accountId: account.accountId)
        return outcome
    }

    /// Keeps a new token in memory; forgets the account when its refresh token died.
    package func absorb(_ outcome: RefreshExecutor.Outcome, accountId: String) {
        switch outcome {
        case .token(let token, _, _): memory.store(token, now: now())
        case .failure(let error) where error.refreshTokenDied: forget(accountId)
        case .failure: break
        }
    }
}
