import Foundation
import IdentityCore
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayStore
import TokenRelayUpstream

/// Refresh-token keep-alive (behaviour §11 `TOKENRELAY_KEEPALIVE_AFTER_DAYS`, §12 Time in tests):
/// redeems the refresh token of accounts idle for that many days so it does not die of
/// inactivity (AADSTS700082 after 90 days, "Refresh tokens in the Microsoft identity platform").
///
/// Each redemption is the normal one (`SilentAcquisition.keepAliveRefresh`: the per-(account,
/// client_id), the fenced rotation, the normal error mapping, so a dead refresh
/// token puts the account in `interaction_required`). A pass holds a lease so one replica at a
/// time runs it, and paces its STS calls at most `maxPerMinute` with jitter. As a ``Service``
/// it runs a pass every `intervalSeconds` until stopped.
///
/// The same pass, holding the same lease, first prunes account events older than
/// `TOKENRELAY_EVENTS_RETENTION_DAYS` (issue 10 item 12), and audit rows, token provenance and
/// receipts older than `TOKENRELAY_AUDIT_RETENTION_DAYS` (behaviour §12 Audit), in bounded batches of
/// ``pruneBatchSize`` rows, each DELETE its own short statement; so it also runs, for pruning
/// only, when keep-alive is off (`TOKENRELAY_KEEPALIVE_AFTER_DAYS=0`). This job rather than the
/// webhook deliverer: it runs in every `serve` whether or not a webhook URL is set, hourly
/// (pruning needs no more), and `token-relay keepalive --once` runs it on demand; the deliverer
/// exists only with a webhook URL and releases its lease after every batch.
package struct KeepAliveJob: Service {
    package let store: KeepAliveStore
    package let leases: JobLeaseStore
    package let accounts: TokenStore
    package let tokens: SilentAcquisition
    package let events: AccountEventStore
    package let afterDays: Int
    package let maxPerMinute: Int
    /// Seconds between passes in ``run()``, each jittered ±20 %.
    package var intervalSeconds: Int = 3600
    /// Days events are kept (`TOKENRELAY_EVENTS_RETENTION_DAYS`). Default 30.
    package var eventsRetentionDays: Int = 30
    /// Whether a webhook URL is set: events its receiver has not acknowledged are kept whatever their age.
    package var keepUndeliveredEvents = false
    /// The audit trail and token provenance, pruned with the events.
    package let audit: AuditStore
    /// Days audit rows are kept (`TOKENRELAY_AUDIT_RETENTION_DAYS`); 0 keeps them. Default 365.
    package var auditRetentionDays: Int = 365
    package let metrics: Metrics
    package let logger: Logger

    package init(
        store: KeepAliveStore, leases: JobLeaseStore, accounts: TokenStore, tokens: SilentAcquisition, events: AccountEventStore, afterDays: Int,
        maxPerMinute: Int, intervalSeconds: Int = 3600, eventsRetentionDays: Int = 30, keepUndeliveredEvents: Bool = false, audit: AuditStore,
        auditRetentionDays: Int = 365, metrics: Metrics, logger: Logger
    ) {
        self.audit = audit
        self.auditRetentionDays = auditRetentionDays
        self.store = store
        self.leases = leases
        self.accounts = accounts
        self.tokens = tokens
        self.events = events
        self.afterDays = afterDays
        self.maxPerMinute = maxPerMinute
        self.intervalSeconds = intervalSeconds
        self.eventsRetentionDays = eventsRetentionDays
        self.metrics = metrics
        self.logger = logger
        self.keepUndeliveredEvents = keepUndeliveredEvents
    }
    /// This replica's name in the lease.
    package let holder = "replica_" + RandomToken.make(bytes: 9)

    package static let leaseName = "keepalive"
    /// Candidates one pass looks at; the rest wait for the next pass.
    package static let maxAccountsPerPass = 1000
    /// Scopes asked for when the account has no cached access token (any signed-in account has them).
    package static let fallbackScopes = ["openid", "profile", "offline_access"]
    /// Events one prune DELETE removes at most: a short statement, a short row-lock footprint.
    package static let pruneBatchSize = 1000
    /// Prune statements one pass runs at most (a million events); the rest wait for the next pass.
    package static let maxPruneBatchesPerPass = 1000

    /// What one pass did.
    package struct Summary: Sendable, Equatable {
        /// Whether this replica held the lease (false: another replica runs the pass).
        package var ran = false
        package var refreshed = 0
        /// The STS refused the refresh token (an `account.keepalive_failed` event was written).
        package var failed = 0
        /// Transient failures (STS unreachable, throttled): tried again next pass.
        package var deferred = 0
        /// Events deleted as older than the retention.
        package var prunedEvents = 0
        /// Audit rows, token provenance and token receipts deleted as older than their retention.
        package var prunedAudit = 0

        package var json: String {
            #"{"ran":\#(ran),"refreshed":\#(refreshed),"failed":\#(failed),"deferred":\#(deferred),"pruned_events":\#(prunedEvents),"pruned_audit":\#(prunedAudit)}"#
        }
    }

    /// Runs a pass every ``intervalSeconds`` (±20 %) until cancelled, the first at a random
    /// point of the first interval (10 % to 100 % of it), so that replicas started together
    /// spread over it rather than all reaching for the lease at once, and a restart does not
    /// bring a pass forward (nothing in a pass is urgent: tokens idle for weeks, events kept for
    /// days; `token-relay keepalive --once` runs one at once). A pass in flight stops at its
    /// next redemption; a failed pass is logged and tried next time.
    package func run() async {
        try? await Task.sleep(for: .seconds(Double(intervalSeconds) * Double.random(in: 0.1..<1)))
        while !Task.isCancelled {
            do { _ = try await runPass() } catch { logger.warn("keepalive.pass_failed", ["error": String(describing: type(of: error))]) }
            try? await Task.sleep(for: .seconds(Double(intervalSeconds) * Double.random(in: 0.8..<1.2)))
        }
    }

    /// Runs one pass: prunes old events, then refreshes every account whose refresh token is
    /// older than `afterDays` days (none when keep-alive is off).
    /// - Parameters:
    ///   - sleep: waits between redemptions (seconds); injected so tests need not wait.
    ///   - progress: told the events pruned, then the accounts to refresh and each one done
    ///     (`token-relay keepalive --once`).
    /// - Throws: `RelayError` when the database fails.
    package func runPass(
        sleep: @Sendable (Double) async -> Void = { try? await Task.sleep(for: .seconds($0)) }, progress: (any ProgressSink)? = nil
    ) async throws -> Summary {
        var summary = Summary()
        let spacing = 60.0 / Double(max(1, maxPerMinute))
        // The lease outlives one spacing comfortably and is renewed before every redemption.
        let leaseSeconds = Int(spacing * 1.5) + 120
        guard try await leases.acquire(job: Self.leaseName, holder: holder, seconds: leaseSeconds) else { return summary }
        summary.ran = true
        do {
            summary.prunedEvents = try await pruneEvents(leaseSeconds: leaseSeconds, progress: progress)
            summary.prunedAudit = try await pruneAudit(leaseSeconds: leaseSeconds, progress: progress)
        } catch {
            try? await leases.release(job: Self.leaseName, holder: holder)
            throw error
        }
        guard afterDays > 0 else {
            try? await leases.release(job: Self.leaseName, holder: holder)
            return summary
        }
        let candidates = try await store.idleAccountIds(olderThanDays: afterDays, limit: Self.maxAccountsPerPass)
        logger.info("keepalive.pass_started", ["keepalive.candidates": String(candidates.count)])
        progress?.begin("accounts", total: candidates.count)
        defer { progress?.end() }
        for (index, accountId) in candidates.enumerated() {
            defer { progress?.advance(by: 1) }
            if index > 0 {
                // Jitter only lengthens the gap (1–1.5 × spacing), so the rate never exceeds the bound.
                await sleep(spacing * Double.random(in: 1..<1.5))
                // Stopped (shutdown): the rest wait for the next pass rather than go unpaced.
                guard !Task.isCancelled, try await leases.acquire(job: Self.leaseName, holder: holder, seconds: leaseSeconds) else { break }
            }
            // A tenant suspended since the candidates were read is skipped too (behaviour §12 Tenants).
            guard let account = try await accounts.account(id: accountId), account.state == .active,
                tokens.suspensions.suspendedTenant(of: account) == nil
            else { continue }
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

    /// Deletes events older than the retention, ``pruneBatchSize`` per statement, renewing the
    /// lease between statements; stops early when the lease is lost or the task is cancelled.
    /// - Returns: the events deleted.
    private func pruneEvents(leaseSeconds: Int, progress: (any ProgressSink)?) async throws -> Int {
        progress?.begin("events", total: nil)
        defer { progress?.end() }
        var pruned = 0
        for batch in 0..<Self.maxPruneBatchesPerPass {
            if batch > 0 {
                guard !Task.isCancelled, try await leases.acquire(job: Self.leaseName, holder: holder, seconds: leaseSeconds) else { break }
            }
            let deleted = try await events.prune(
                olderThanDays: eventsRetentionDays, keepUndelivered: keepUndeliveredEvents, limit: Self.pruneBatchSize)
            pruned += deleted
            progress?.advance(by: deleted)
            if deleted < Self.pruneBatchSize { break }
        }
        if pruned > 0 {
            metrics.increment("tokenrelay_events_pruned_total", by: Double(pruned))
            logger.info("events.pruned", ["events.count": String(pruned), "events.retention_days": String(eventsRetentionDays)])
        }
        return pruned
    }

    /// Deletes audit rows, token provenance and receipts older than the audit retention, up to
    /// ``pruneBatchSize`` of each per statement, renewing the lease between statements; nothing
    /// when the retention is 0.
    /// - Returns: the rows deleted.
    private func pruneAudit(leaseSeconds: Int, progress: (any ProgressSink)?) async throws -> Int {
        guard auditRetentionDays > 0 else { return 0 }
        progress?.begin("audit", total: nil)
        defer { progress?.end() }
        var pruned = (events: 0, provenance: 0, receipts: 0)
        for batch in 0..<Self.maxPruneBatchesPerPass {
            if batch > 0 {
                guard !Task.isCancelled, try await leases.acquire(job: Self.leaseName, holder: holder, seconds: leaseSeconds) else { break }
            }
            let deleted = try await audit.prune(olderThanDays: auditRetentionDays, limit: Self.pruneBatchSize)
            pruned = (pruned.events + deleted.events, pruned.provenance + deleted.provenance, pruned.receipts + deleted.receipts)
            progress?.advance(by: deleted.events + deleted.provenance + deleted.receipts)
            if max(deleted.events, deleted.provenance, deleted.receipts) < Self.pruneBatchSize { break }
        }
        let total = pruned.events + pruned.provenance + pruned.receipts
        if total > 0 {
            for (table, count) in [("audit_events", pruned.events), ("token_provenance", pruned.provenance), ("token_receipts", pruned.receipts)]
            where count > 0 {
                metrics.increment("tokenrelay_audit_pruned_total", ["table": table], by: Double(count))
            }
            logger.info(
                "audit.pruned",
                [
                    "audit.events": String(pruned.events), "audit.provenance": String(pruned.provenance), "audit.receipts": String(pruned.receipts),
                    "audit.retention_days": String(auditRetentionDays),
                ])
        }
        return total
    }

    private enum Outcome { case refreshed, failed, deferred }

    private func keepAlive(_ account: AccountRecord) async -> Outcome {
        let context = RequestContext.background(seconds: 30)
        let outcome: Outcome
        do {
            let scopes = try await store.recentScopes(accountId: account.accountId, realm: account.realm) ?? Self.fallbackScopes
            switch try await tokens.keepAliveRefresh(account: account, scopes: ScopeSet(normalizing: scopes), context: context) {
            case .token:
                try await store.markRedeemed(accountId: account.accountId)
                outcome = .refreshed
            case .failure(let error):
                outcome = try await failed(account, RelayError(error))
            }
        } catch let problem as RelayError {
            outcome = (try? await failed(account, problem)) ?? .deferred
        } catch {
            outcome = .deferred
        }
        metrics.increment("tokenrelay_keepalive_total", ["outcome": "\(outcome)"])
        return outcome
    }

    /// A refusal the STS will repeat (the refresh token is dead, or needs the user) becomes an
    /// `account.keepalive_failed` event; a transient one waits for the next pass.
    private func failed(_ account: AccountRecord, _ problem: RelayError) async throws -> Outcome {
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
