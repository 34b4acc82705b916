import Foundation
import IdentityCore

/// Refresh-token keep-alive (behaviour §11 `TOKENRELAY_KEEPALIVE_AFTER_DAYS`, §12 Time in tests):
/// redeems the refresh token of accounts idle for that many days so it does not die of
/// inactivity (AADSTS700082 after 90 days, "Refresh tokens in the Microsoft identity platform").
///
/// Each redemption is the normal one (`SilentAcquisition.keepAliveRefresh`: the per-(account,
/// client_id), the fenced rotation, the normal error mapping, so a dead refresh
/// token puts the account in `interaction_required`). A pass holds a lease so one replica at a
/// time runs it, and paces its STS calls at most `maxPerMinute` with jitter. As a ``Service``
/// it runs a pass every `intervalSeconds` until stopped.
struct KeepAliveJob: Service {
    let store: KeepAliveStore
    let leases: JobLeaseStore
    let accounts: TokenStore
    let tokens: SilentAcquisition
    let events: AccountEventStore
    let afterDays: Int
    let maxPerMinute: Int
    /// Seconds between passes in ``run()``, each jittered ±20 %.
    var intervalSeconds: Int = 3600
    let metrics: Metrics
    let logger: Logger
    /// This replica's name in the lease.
    let holder = "replica_" + RandomToken.make(bytes: 9)

    static let leaseName = "keepalive"
    /// Candidates one pass looks at; the rest wait for the next pass.
    static let maxAccountsPerPass = 1000
    /// Scopes asked for when the account has no cached access token (any signed-in account has them).
    static let fallbackScopes = ["openid", "profile", "offline_access"]

    /// What one pass did.
    struct Summary: Sendable, Equatable {
        /// Whether this replica held the lease (false: another replica runs the pass).
        var ran = false
        var refreshed = 0
        /// The STS refused the refresh token (an `account.keepalive_failed` event was written).
        var failed = 0
        /// Transient failures (STS unreachable, throttled): tried again next pass.
        var deferred = 0

        var json: String { #"{"ran":\#(ran),"refreshed":\#(refreshed),"failed":\#(failed),"deferred":\#(deferred)}"# }
    }

    /// Runs a pass every ``intervalSeconds`` (±20 %) until cancelled, the first 10–70 s after
    /// start so that replicas started together do not all reach for the lease at once. A pass
    /// in flight stops at its next redemption; a failed pass is logged and tried next time.
    func run() async {
        try? await Task.sleep(for: .seconds(Double.random(in: 10..<70)))
        while !Task.isCancelled {
            do { _ = try await runPass() } catch { logger.warn("keepalive.pass_failed", ["error": String(describing: type(of: error))]) }
            try? await Task.sleep(for: .seconds(Double(intervalSeconds) * Double.random(in: 0.8..<1.2)))
        }
    }

    /// Runs one pass: every account whose refresh token is older than `afterDays` days.
    /// - Parameter sleep: waits between redemptions (seconds); injected so tests need not wait.
    /// - Throws: `Problem` when the database fails.
    func runPass(sleep: @Sendable (Double) async -> Void = { try? await Task.sleep(for: .seconds($0)) }) async throws -> Summary {
        var summary = Summary()
        guard afterDays > 0 else { return summary }
        let spacing = 60.0 / Double(max(1, maxPerMinute))
        // The lease outlives one spacing comfortably and is renewed before every redemption.
        let leaseSeconds = Int(spacing * 1.5) + 120
        guard try await leases.acquire(job: Self.leaseName, holder: holder, seconds: leaseSeconds) else { return summary }
        summary.ran = true
        let candidates = try await store.idleAccountIds(olderThanDays: afterDays, limit: Self.maxAccountsPerPass)
        logger.info("keepalive.pass_started", ["keepalive.candidates": String(candidates.count)])
        for (index, accountId) in candidates.enumerated() {
            if index > 0 {
                // Jitter only lengthens the gap (1–1.5 × spacing), so the rate never exceeds the bound.
                await sleep(spacing * Double.random(in: 1..<1.5))
                // Stopped (shutdown): the rest wait for the next pass rather than go unpaced.
                guard !Task.isCancelled, try await leases.acquire(job: Self.leaseName, holder: holder, seconds: leaseSeconds) else { break }
            }
            guard let account = try await accounts.account(id: accountId), account.state == .active else { continue }
            switch await keepAlive(account) {
            case .refreshed: summary.refreshed += 1
            case .failed: summary.failed += 1
            case .deferred: summary.deferred += 1
            }
        }
        try? await leases.release(job: Self.leaseName, holder: holder)
        logger.info(
            "keepalive.pass_finished",
            ["keepalive.refreshed": String(summary.refreshed), "keepalive.failed": String(summary.failed), "keepalive.deferred": String(summary.deferred)])
        return summary
    }

    private enum Outcome { case refreshed, failed, deferred }

    private func keepAlive(_ account: AccountRecord) async -> Outcome {
        let context = RequestContext(
            correlationId: AppHTTPHandler.newCorrelationId(), deadline: Date().addingTimeInterval(30), caller: nil, access: .unrestricted)
        let outcome: Outcome
        do {
            let scopes = try await store.recentScopes(accountId: account.accountId, realm: account.realm) ?? Self.fallbackScopes
            switch try await tokens.keepAliveRefresh(account: account, scopes: ScopeSet(normalizing: scopes), context: context) {
            case .token:
                try await store.markRedeemed(accountId: account.accountId)
                outcome = .refreshed
            case .failure(let error):
                outcome = try await failed(account, Problem(error))
            }
        } catch let problem as Problem {
            outcome = (try? await failed(account, problem)) ?? .deferred
        } catch {
            outcome = .deferred
        }
        metrics.increment("tokenrelay_keepalive_total", ["outcome": "\(outcome)"])
        return outcome
    }

    /// A refusal the STS will repeat (the refresh token is dead, or needs the user) becomes an
    /// `account.keepalive_failed` event; a transient one waits for the next pass.
    private func failed(_ account: AccountRecord, _ problem: Problem) async throws -> Outcome {
        // Anything else (unreachable, throttled, a rejected client credential) is not the account's.
        guard problem.code == .interactionRequired || problem.code == .invalidScope else {
            logger.warn("keepalive.deferred", ["account.id": account.accountId, "error": problem.code.rawValue])
            return .deferred
        }
        var data: [String: JSONValue] = ["error": .string(problem.code.rawValue)]
        for key in ["account_state", "sts_error_codes", "suberror"] { data[key] = problem.extensions[key] }
        try await events.append(.keepAliveFailed, accountId: account.accountId, data: data)
        logger.info("keepalive.failed", ["account.id": account.accountId, "error": problem.code.rawValue])
        return .failed
    }
}
