import Foundation
import IdentityCore
import PostgresBridge
import Synchronization
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayDownstream
import TokenRelayStore

/// A shutdown drains the work no request awaits (issue 27 item 5): a rotated refresh token held
/// in memory because PostgreSQL went away after the STS answered gets the shutdown grace to be
/// stored, before the pool closes, and is logged as lost, without its value, when the grace ends
/// first. In process, on the refresh executor's real parts (a fresh database, the real
/// `TokenStore` behind an outage switch), the STS scripted; the services run in a real
/// ``ServiceGroup``.
@Suite("Background tasks at shutdown", .serialized)
struct BackgroundTasksShutdownTests {
    @Test("A rotation held while PostgreSQL is down is stored when it is back before the grace ends, before the pool closes")
    func heldRotationStoredWithinGrace() async throws {
        try await RefreshExecutorTests.withDatabase("shutdown_rotation_stored") { db in
            // A grace far longer than the store takes, even on a loaded machine: the group must
            // stop on the rotation stored, not on the grace.
            let grace = 30.0
            let run = try await Self.holdRotation(db, graceSeconds: grace)
            let closedWithRotationStored = Mutex<Bool?>(nil)
            let group = ServiceGroup(
                services: [
                    // As AppDependencies.services(): the pool closes after the background tasks drained.
                    OnStop("Resources") {
                        closedWithRotationStored.withLock { $0 = run.pending.count == 0 }
                        db.pool.close()
                    },
                    run.tasks,
                ], onStopping: { run.tasks.beginGrace() }, logger: run.logger)
            let started = ContinuousClock.now
            let stopped = Task { try await group.run() }
            group.triggerGracefulShutdown()
            try await Task.sleep(for: .milliseconds(600))
            run.store.setDown(false)
            try await stopped.value
            let took = ContinuousClock.now - started

            #expect(took < .seconds(grace), "the group waited \(took), the whole grace, for a rotation stored at about 0.6 s")
            #expect(closedWithRotationStored.withLock { $0 } == true)
            #expect(try await Self.storedRefreshToken(db, run.account) == run.issued)
            let log = run.sink.captured.joined(separator: "\n")
            #expect(log.contains("token.rotation_stored_on_retry"))
            #expect(!log.contains("token.rotation_lost"))
            #expect(!log.contains(run.issued))
        }
    }

    @Test("A rotation held while PostgreSQL stays down is logged as lost, without its value, when the grace ends")
    func heldRotationLostAtGraceEnd() async throws {
        try await RefreshExecutorTests.withDatabase("shutdown_rotation_lost") { db in
            let grace = 2.0
            let run = try await Self.holdRotation(db, graceSeconds: grace)
            let group = ServiceGroup(services: [run.tasks], onStopping: { run.tasks.beginGrace() }, logger: run.logger)
            let started = ContinuousClock.now
            let stopped = Task { try await group.run() }
            group.triggerGracefulShutdown()
            try await stopped.value
            let took = ContinuousClock.now - started

            #expect(took >= .seconds(grace), "the group stopped after \(took), before the grace ended")
            // Generous: a loaded machine is slow, but a stop that waited for the persister's
            // 300 s window would not pass.
            #expect(took < .seconds(grace + 60), "the group stopped \(took) after the shutdown began")
            let lost = run.sink.captured.filter { $0.contains(#""event":"token.rotation_lost""#) }
            #expect(lost.count == 1)
            #expect(lost.first?.contains(run.account.accountId) == true)
            let log = run.sink.captured.joined(separator: "\n")
            #expect(!log.contains(run.issued), "a log line holds the rotated refresh token")
            #expect(!log.contains("rt-0"))
            #expect(run.pending.count == 0)
            run.store.setDown(false)
            #expect(try await Self.storedRefreshToken(db, run.account) == "rt-0")
        }
    }

    /// A refresh whose rotation could not be stored: PostgreSQL goes down while the STS answers,
    /// stays down through the executor's short retries, and the rotation is held in memory, its
    /// persister running in `tasks`.
    struct HeldRotation {
        let account: AccountRecord
        let issued: String
        let store: OutageStore
        let tasks: BackgroundTasks
        let pending: PendingRotations
        let logger: Logger
        let sink: LogSink
    }

    static func holdRotation(_ db: RefreshExecutorTests.Harness, graceSeconds: Double) async throws -> HeldRotation {
        let account = try await db.signIn(refreshToken: "rt-0")
        let store = OutageStore(inner: db.store)
        let endpoint = ScriptedEndpoint(hold: [0])
        let sink = LogSink.memory()
        let logger = Logger(level: .info, logPII: false, sink: sink)
        let tasks = BackgroundTasks(graceSeconds: graceSeconds, logger: logger)
        let pending = PendingRotations()
        let executor = RefreshExecutor(
            store: store, endpoint: endpoint, clientId: RefreshExecutorTests.clientId, expirySkewSeconds: 300, limiter: RedemptionLimiter(limit: 8),
            waiters: LeaseWaiters(), pendingRotations: pending, tasks: tasks, metrics: Metrics(), logger: logger,
            now: { Int(Date().timeIntervalSince1970) })
        let refresh = Task { try await executor.run(db.request(account)) }
        _ = try await endpoint.call(0)
        store.setDown(true)
        endpoint.release(0)
        _ = try await refresh.value
        let issued = try #require(endpoint.calls.first?.issuedRefreshToken)
        #expect(pending.count == 1)
        #expect(sink.captured.contains { $0.contains(#""event":"token.rotation_pending""#) })
        return HeldRotation(account: account, issued: issued, store: store, tasks: tasks, pending: pending, logger: logger, sink: sink)
    }

    /// Read through the other pool: the test's own may be closed.
    static func storedRefreshToken(_ db: RefreshExecutorTests.Harness, _ account: AccountRecord) async throws -> String? {
        let store = db.otherStore
        let id = account.accountId
        return try await store.database.run { connection in try store.refreshToken(in: connection, accountId: id)?.token }
    }
}

/// The real store behind a switch: while down, every call fails as a lost connection does.
final class OutageStore: RefreshTokenStore, Sendable {
    let inner: TokenStore
    private let down = Mutex(false)

    init(inner: TokenStore) { self.inner = inner }

    func setDown(_ value: Bool) { down.withLock { $0 = value } }

    private func check() throws {
        if down.withLock({ $0 }) { throw StoreError(PostgresError(code: .connectionFailure, function: "PQexecParams")) }
    }

    func claimRefresh(_ claim: RefreshClaimRequest) async throws -> RefreshClaim {
        try check()
        return try await inner.claimRefresh(claim)
    }

    func writeRotation(_ write: RotationWrite) async throws -> RotationWriteOutcome {
        try check()
        return try await inner.writeRotation(write)
    }

    func releaseRefreshLease(accountId: String, owner: String) async throws {
        try check()
        try await inner.releaseRefreshLease(accountId: accountId, owner: owner)
    }

    func renewRefreshLease(accountId: String, owner: String, leaseSeconds: Double) async throws -> Bool {
        try check()
        return try await inner.renewRefreshLease(accountId: accountId, owner: owner, leaseSeconds: leaseSeconds)
    }

    func markRefreshTokenDead(accountId: String, generation: Int64, stsErrorCodes: [Int]) async throws -> Bool {
        try check()
        return try await inner.markRefreshTokenDead(accountId: accountId, generation: generation, stsErrorCodes: stsErrorCodes)
    }

    func accessTokens(accountId: String, environment: String, realm: String) async throws -> [StoredAccessToken] {
        try check()
        return try await inner.accessTokens(accountId: accountId, environment: environment, realm: realm)
    }
}
