import Foundation
import PostgresBridge
import Synchronization
import Testing
import TokenRelayTesting

/// TokenRelay on a managed-HA-style PostgreSQL (docs/failover.md): a primary and a synchronous
/// streaming standby behind a libpq multi-host URL with `target_session_attrs=read-write`; the
/// primary crashes under load and the standby is promoted. Behaviour §5 (database down → 503
/// with Retry-After, recovery by itself) must hold across the switch, and no refresh-token
/// rotation may be lost (`synchronous_commit = on`: what the old primary acknowledged is on the
/// standby; what it did not, the relay holds in memory and stores on the new primary).
@Suite("Failover to a promoted standby, end to end", .serialized, .timingGroup(.heavy))
struct FailoverTests {
    static let silentPath = ReplicaTests.silentPath
    /// Seconds between the primary's crash and the promotion: the failure detection of a managed
    /// service (typically 10–30 s; shortened here, it does not change what callers see, only how long).
    /// 2 s: longer than a redemption's own write retries (1.5 s), so the window shows both
    /// what a caller in flight sees (its answer, the write held) and what later callers see (503).
    static let detectionSeconds = 2.0
    /// Every account must be served again within this many seconds of the promotion.
    static let recoveryBound = 10.0

    /// `read-write` is the recommended URL: new connections skip the standby until it is
    /// promoted. `any` (libpq's default) lets them land on the read-only standby during the
    /// window, where every write is refused with SQLSTATE 25006: that must be a 503 and a
    /// replaced connection, not a 500 and a connection kept on the wrong server.
    @Test(
        "primary crashes under load, standby promoted: never a 500, 503/504 only in the window, every account served again, no rotation lost, readiness and LISTEN recover",
        arguments: ["read-write", "any"])
    func failoverUnderLoad(targetSessionAttrs: String) async throws {
        let postgres = try await ReplicatedPostgres()
        do {
            try await failover(on: postgres, targetSessionAttrs: targetSessionAttrs)
            await postgres.destroy()
        } catch {
            await postgres.destroy()
            throw error
        }
    }

    private func failover(on postgres: ReplicatedPostgres, targetSessionAttrs: String) async throws {
        let url = postgres.url.replacingOccurrences(of: "target_session_attrs=read-write", with: "target_session_attrs=\(targetSessionAttrs)")
        // Half the accounts get tokens expired on arrival (every silent request redeems), half
        // long-lived ones (served from the cache, every fifth request forced to refresh).
        let refreshing = (0..<4).map { "fo-refresh\($0)@contoso.example" }
        let cached = (0..<4).map { "fo-cached\($0)@contoso.example" }
        let usersFile = try ReplicaTests.usersFile(refreshing + cached)
        defer { try? FileManager.default.removeItem(atPath: usersFile) }
        // No rotation grace: presenting a superseded refresh token fails, so a rotation lost
        // in the failover shows as a failed redemption afterwards. The default refresh lease
        // (5 s), shorter than the window: a lease that runs out while no primary answers is taken
        // over, and the takeover must redeem the rotation its holder still keeps in memory.
        let stack = try await TokenRelayStack(
            name: "e2e_failover", emulatorArguments: ["--users", usersFile, "--rotation-grace-seconds", "0"], databaseURL: url)
        defer { stack.stop() }
        var accounts: [(id: String, forceEvery: Int)] = []
        for user in refreshing {
            _ = try await stack.control("POST", "/_control/users/\(user)", json: ["expires_in": 120])
            accounts.append((try await stack.signInAccountId(user), 0))
            // Redemptions take a while, so some are at the STS when the primary goes.
            _ = try await stack.control("POST", "/_control/users/\(user)", json: ["latency_ms": 200])
        }
        for user in cached { accounts.append((try await stack.signInAccountId(user), 5)) }
        let load = accounts

        let log = FailoverLog()
        let loader = Task {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        while !log.stopped {
                            let turn = log.nextIndex()
                            let account = load[turn % load.count]
                            let force = account.forceEvery > 0 && (turn / load.count) % account.forceEvery == 0
                            let started = Date()
                            do {
                                let answer = try await stack.request(
                                    "POST", Self.silentPath, json: ["account_id": account.id, "scopes": ["User.Read"], "force_refresh": force])
                                log.add(account.id, .init(at: started, answer: answer), finished: Date())
                            } catch {
                                log.add(account.id, .init(at: started, status: 0, detail: "\(error)"), finished: Date())
                            }
                        }
                    }
                }
            }
        }
        // A precondition, not the behaviour under test: generous, since the heavy group shares the cores.
        let warmedUp = try await ReplicaTests.within(30) { log.count(status: 200) >= 40 }
        #expect(warmedUp != nil, "the load never got going: \(log.count(status: 200)) answers 200 in 30 s")

        // Taken before the call: the crash happens during it.
        let downAt = Date()
        try await postgres.stopPrimary()
        try await Task.sleep(for: .seconds(Self.detectionSeconds))
        try await postgres.promote()
        let promotedAt = Date()
        let ids = Set(load.map(\.id))
        // Readiness polled alongside, so both figures count from the promotion.
        let readiness = Task {
            try await ReplicaTests.within(Self.recoveryBound) { try await stack.request("GET", "/readyz", authenticated: false).status == 200 }
                .map { _ in Date().timeIntervalSince(promotedAt) }
        }
        let allServed = try await ReplicaTests.within(Self.recoveryBound) { log.accountsServed(since: promotedAt) == ids }
        let readyAfter = try await readiness.value
        // Load on the new primary for a while: no error may follow the recovery.
        try await Task.sleep(for: .seconds(1))
        log.stop()
        await loader.value
        let recoveredAt = promotedAt.addingTimeInterval(allServed ?? Self.recoveryBound)
        let outcomes = log.snapshot
        print(
            "failover (target_session_attrs=\(targetSessionAttrs)): primary stopped, promoted \(String(format: "%.2f", promotedAt.timeIntervalSince(downAt))) s later; every account served again "
                + "\(allServed.map { String(format: "%.2f", $0) } ?? "never") s after the promotion, readiness pass after "
                + "\(readyAfter.map { String(format: "%.2f", $0) } ?? "never") s; \(log.summary(downAt: downAt, promotedAt: promotedAt, recoveredAt: recoveredAt))"
        )
        #expect(allServed != nil, "not every account was served within \(Self.recoveryBound) s of the promotion")
        #expect(readyAfter != nil, "readiness did not recover within \(Self.recoveryBound) s of the promotion")

        // Never a 500 (nor anything but 200, 503, 504); 503/504 only inside the window, as problem+json
        // with Retry-After. The window opens a moment before the crash: requests already in flight.
        let windowStart = downAt.addingTimeInterval(-1)
        let unexpected = outcomes.filter { ![200, 503, 504].contains($0.status) }
        #expect(unexpected.isEmpty, "\(unexpected.prefix(5).map(\.description))")
        let outside = outcomes.filter { $0.status != 200 && ($0.at < windowStart || $0.at > recoveredAt) }
        #expect(outside.isEmpty, "errors outside the failover window: \(outside.prefix(5).map(\.description))")
        let badUnavailable = outcomes.filter {
            [503, 504].contains($0.status) && ($0.retryAfter == nil || $0.error != "upstream_unavailable" || $0.retryAfterSeconds == nil)
        }
        #expect(badUnavailable.isEmpty, "503/504 without upstream_unavailable / Retry-After: \(badUnavailable.prefix(5).map(\.description))")

        // The LISTEN session moved to the new primary: the metric, and the session itself there.
        let listening = try await ReplicaTests.within(Self.recoveryBound) {
            let metrics = try await stack.request("GET", "/metrics", authenticated: false).text
            return ReplicaTests.sample(metrics, "tokenrelay_invalidation_listening") == 1
        }
        #expect(listening != nil, "the relay's LISTEN session did not come back")
        let promoted = PostgresPool(url: postgres.standbyURL, size: 1)
        defer { promoted.close() }
        let listeners = try await promoted.withConnection { connection in
            try connection.query("SELECT count(*) AS n FROM pg_stat_activity WHERE query ILIKE 'LISTEN%'").rows.first?.int("n") ?? 0
        }
        #expect(listeners >= 1, "no LISTEN session on the promoted standby")

        // Rotations held in memory during the window are stored, none given up.
        let relayLog = stack.relay.log()
        let pending = relayLog.components(separatedBy: #""event":"token.rotation_pending""#).count - 1
        #expect(!relayLog.contains("token.rotation_lost"))
        // The failover reached the relay's work, not only its idle connections: some request was
        // refused, or some rotation's write failed and was held (its caller answered from the
        // STS's answer, 200, while the write waited for a primary).
        let writesFailed = relayLog.components(separatedBy: #""event":"token.rotation_write_failed""#).count - 1
        let refused = outcomes.filter { [503, 504].contains($0.status) && $0.at >= downAt }.count
        #expect(refused + writesFailed > 0, "no request or write met the failover: the test proves nothing")
        #expect(relayLog.contains("invalidation.listener_lost"), "the LISTEN session never noticed the primary was gone")
        let readOnlyRefusals = relayLog.components(separatedBy: "SQLSTATE 25006").count - 1
        if targetSessionAttrs == "any" {
            #expect(readOnlyRefusals > 0, "no connection landed on the read-only standby: the variant proves nothing")
        }
        // No lost rotation: a replica started now holds nothing in memory and redeems exactly the
        // refresh token stored on the new primary, which under grace 0 works only if it is the
        // chain's head.
        let fresh = try await stack.startReplica()
        defer { fresh.stop() }
        let finals = try await withThrowingTaskGroup(of: TestResponse.self) { group in
            for account in load {
                group.addTask {
                    try await stack.request(
                        "POST", fresh.baseURL + Self.silentPath, json: ["account_id": account.id, "scopes": ["User.Read"], "force_refresh": true])
                }
            }
            return try await group.reduce(into: [TestResponse]()) { $0.append($1) }
        }
        let failed = finals.filter { $0.status != 200 || $0.json["source"] as? String != "refresh" }
        #expect(failed.isEmpty, "a refresh token stored after the failover no longer redeems: \(failed.prefix(5).map(\.text))")
        let chains = (try await stack.control("GET", "/_control/stats").json["refresh_token_chain"] as? [String: [String: Int]]) ?? [:]
        let superseded = chains.values.reduce(0) { $0 + ($1["rejected_superseded"] ?? 0) }
        print(
            "failover (target_session_attrs=\(targetSessionAttrs)): \(refused) request(s) answered 503/504, \(writesFailed) rotation write(s) failed and \(pending) held in memory during the window, "
                + "\(readOnlyRefusals) statement(s) refused as read-only (25006); \(superseded) superseded refresh token(s) presented")
        #expect(superseded == 0, "a superseded refresh token was redeemed: \(chains)")
    }
}

/// What the load of ``FailoverTests`` saw: each answer with the time it was sent, per account.
final class FailoverLog: Sendable {
    private let state = Mutex((outcomes: [(account: String, outcome: StormLog.Outcome, finished: Date)](), next: 0, stopped: false))

    var stopped: Bool { state.withLock { $0.stopped } }

    func stop() { state.withLock { $0.stopped = true } }

    func nextIndex() -> Int {
        state.withLock { state in
            state.next += 1
            return state.next
        }
    }

    func add(_ account: String, _ outcome: StormLog.Outcome, finished: Date) {
        state.withLock { $0.outcomes.append((account, outcome, finished)) }
    }

    var snapshot: [StormLog.Outcome] { state.withLock { $0.outcomes.map(\.outcome) } }

    func count(status: Int) -> Int { state.withLock { $0.outcomes.filter { $0.outcome.status == status }.count } }

    /// The accounts that had a request sent at or after `since` answered 200.
    func accountsServed(since: Date) -> Set<String> {
        state.withLock { Set($0.outcomes.filter { $0.outcome.status == 200 && $0.outcome.at >= since }.map(\.account)) }
    }

    func summary(downAt: Date, promotedAt: Date, recoveredAt: Date) -> String {
        let all = state.withLock { $0.outcomes }
        func counts(_ range: Range<Date>) -> String {
            let inRange = all.filter { range.contains($0.outcome.at) }
            return Dictionary(grouping: inRange, by: \.outcome.status).mapValues(\.count).sorted { $0.key < $1.key }
                .map { "\($0.key)×\($0.value)" }.joined(separator: " ")
        }
        let errors = all.filter { $0.outcome.status != 200 }
        let lastError = errors.map(\.finished).max().map { String(format: "%.2f", $0.timeIntervalSince(promotedAt)) } ?? "-"
        let slowest = all.map { $0.finished.timeIntervalSince($0.outcome.at) }.max() ?? 0
        return
            "slowest answer \(String(format: "%.2f", slowest)) s; before the crash \(counts(Date.distantPast..<downAt)); crash to promotion \(counts(downAt..<promotedAt)); "
            + "promotion to recovery \(counts(promotedAt..<recoveredAt)); after \(counts(recoveredAt..<Date.distantFuture)); "
            + "last error answered \(lastError) s after the promotion"
    }
}
