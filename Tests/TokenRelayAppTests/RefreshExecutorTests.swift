import Foundation
import IdentityCore
import PostgresBridge
import Synchronization
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore
import TokenRelayTesting
import TokenRelayUpstream

/// The refresh engine (ADR 0012) on its real parts: a fresh PostgreSQL database with the
/// migrations applied and the real `TokenStore`; only the STS is scripted, by an in-process
/// ``ScriptedEndpoint`` that rotates like the STS (a new refresh token on every redemption) and
/// lets the test hold a call in flight to drive exact interleavings. A "replica" is an executor
/// with its own pool, lease waiters, limiter and pending rotations on the same database.
@Suite("Refresh executor", .serialized)
struct RefreshExecutorTests {
    static let clientId = "6731de76-14a6-49ae-97bc-6eba6914391e"
    static let environment = "login.microsoftonline.com"
    static let realm = "72f988bf-86f1-41af-91ab-2d7cd011db47"
    static let scopes = ScopeSet(normalizing: ["https://graph.microsoft.com/User.Read"])

    // MARK: Tests

    @Test("1. A rotation is stored: generation + 1, the new token, a lineage link, the lease released")
    func rotationStored() async throws {
        try await Self.withDatabase("refresh_rotation") { db in
            let account = try await db.signIn(refreshToken: "rt-0")
            let before = try #require(try await db.row(account))
            let endpoint = ScriptedEndpoint()
            let outcome = try await db.executor(endpoint).run(db.request(account))

            let (token, source) = try #require(Self.token(outcome))
            #expect(source == .refresh)
            let call = try #require(endpoint.calls.first)
            #expect(endpoint.calls.count == 1)
            #expect(call.refreshToken == "rt-0")
            #expect(token.secret == call.accessToken)
            let newToken = try #require(call.issuedRefreshToken)

            let after = try #require(try await db.row(account))
            #expect(after.generation == before.generation + 1)
            #expect(after.leaseOwner == nil)
            #expect(try await db.storedRefreshToken(account) == newToken)
            let link = try #require(try await db.store.refreshTokenLineage(accountId: account.accountId).first)
            #expect(link.generation == after.generation)
            #expect(link.cause == "rotation")
            #expect(link.fingerprint == TokenStore.lineageDigest(newToken))
            #expect(link.replacedFingerprint == TokenStore.lineageDigest("rt-0"))
            // The access token was stored with the rotation.
            let cached = try await db.store.accessTokens(accountId: account.accountId, environment: Self.environment, realm: Self.realm)
            #expect(cached.map(\.secret) == [token.secret])
        }
    }

    @Test("2. No refresh token in the answer (case 14): the generation and the stored token stay, the lease is released")
    func noRotation() async throws {
        try await Self.withDatabase("refresh_no_rotation") { db in
            let account = try await db.signIn(refreshToken: "rt-0")
            let before = try #require(try await db.row(account))
            let endpoint = ScriptedEndpoint(script: [0: .keep])
            let outcome = try await db.executor(endpoint).run(db.request(account))

            let (token, source) = try #require(Self.token(outcome))
            #expect(source == .refresh)
            #expect(token.secret == endpoint.calls.first?.accessToken)
            let after = try #require(try await db.row(account))
            #expect(after.generation == before.generation)
            #expect(after.leaseOwner == nil)
            #expect(try await db.storedRefreshToken(account) == "rt-0")
            #expect(try await db.store.refreshTokenLineage(accountId: account.accountId).map(\.cause) == ["sign_in"])
        }
    }

    @Test("3a. Two replicas at once: one redemption; the other waits and serves the stored token from cache")
    func twoReplicasCacheFirst() async throws {
        try await Self.withDatabase("refresh_two_cache") { db in
            let account = try await db.signIn(refreshToken: "rt-0")
            let endpoint = ScriptedEndpoint(hold: [0])
            let replicaA = db.executor(endpoint, store: db.store)
            let replicaB = db.executor(endpoint, store: db.otherStore, metrics: Metrics())
            let first = Task { try await replicaA.run(db.request(account)) }
            let held = try await endpoint.call(0)
            #expect(held.refreshToken == "rt-0")

            let second = Task { try await replicaB.run(db.request(account, mode: .cacheFirst)) }
            try await Self.eventually { replicaB.metrics.value("tokenrelay_refresh_claims_total", ["result": "held_elsewhere"]) >= 1 }
            #expect(endpoint.calls.count == 1)

            endpoint.release(0)
            let (tokenA, sourceA) = try #require(Self.token(try await first.value))
            let outcomeB = try await second.value
            let (tokenB, sourceB) = try #require(Self.token(outcomeB), "replica B answered \(outcomeB)")
            #expect(sourceA == .refresh)
            #expect(sourceB == .cache)
            #expect(tokenB.secret == tokenA.secret)
            #expect(endpoint.calls.count == 1)
            #expect(try await db.storedRefreshToken(account) == endpoint.calls[0].issuedRefreshToken)
        }
    }

    @Test("3b. Two replicas at once, bypassing the cache: the second redeems after the first, with the rotated token (a chain)")
    func twoReplicasBypass() async throws {
        try await Self.withDatabase("refresh_two_bypass") { db in
            let account = try await db.signIn(refreshToken: "rt-0")
            let start = try #require(try await db.row(account)).generation
            let endpoint = ScriptedEndpoint(hold: [0])
            let replicaA = db.executor(endpoint, store: db.store)
            let replicaB = db.executor(endpoint, store: db.otherStore, metrics: Metrics())
            let first = Task { try await replicaA.run(db.request(account, mode: .bypass)) }
            _ = try await endpoint.call(0)
            let second = Task { try await replicaB.run(db.request(account, mode: .bypass)) }
            try await Self.eventually { replicaB.metrics.value("tokenrelay_refresh_claims_total", ["result": "held_elsewhere"]) >= 1 }
            #expect(endpoint.calls.count == 1)

            endpoint.release(0)
            let (_, sourceA) = try #require(Self.token(try await first.value))
            let (_, sourceB) = try #require(Self.token(try await second.value))
            #expect(sourceA == .refresh)
            #expect(sourceB == .refresh)
            let calls = endpoint.calls
            #expect(calls.count == 2)
            #expect(calls.map(\.refreshToken) == ["rt-0", try #require(calls[0].issuedRefreshToken)])
            #expect(calls[1].startedAt >= (try #require(calls[0].answeredAt)))
            let row = try #require(try await db.row(account))
            #expect(row.generation == start + 2)
            #expect(row.leaseOwner == nil)
            #expect(try await db.storedRefreshToken(account) == calls[1].issuedRefreshToken)
            let lineage = try await db.store.refreshTokenLineage(accountId: account.accountId)
            let expected: [String?] = [TokenStore.lineageDigest(calls[1].refreshToken), TokenStore.lineageDigest(calls[0].refreshToken), nil]
            #expect(lineage.map(\.replacedFingerprint) == expected)
        }
    }

    @Test("4. A sign-in stores a new chain while the STS answers: the answer is served, nothing of it is stored")
    func fencedOutBySignIn() async throws {
        try await Self.withDatabase("refresh_fenced_sign_in") { db in
            let account = try await db.signIn(refreshToken: "rt-0")
            let endpoint = ScriptedEndpoint(hold: [0])
            let executor = db.executor(endpoint)
            let running = Task { try await executor.run(db.request(account)) }
            _ = try await endpoint.call(0)
            // The returning user signs in again (its own short transaction, the refresh lock first).
            _ = try await db.signIn(refreshToken: "rt-sign-in")
            let signedIn = try #require(try await db.row(account))

            endpoint.release(0)
            let (token, source) = try #require(Self.token(try await running.value))
            #expect(source == .refresh)
            #expect(token.secret == endpoint.calls[0].accessToken)
            let row = try #require(try await db.row(account))
            #expect(row.generation == signedIn.generation)
            #expect(row.leaseOwner == nil)
            #expect(try await db.storedRefreshToken(account) == "rt-sign-in")
            #expect(try await db.store.refreshTokenLineage(accountId: account.accountId).first?.cause == "sign_in")
            #expect(try await db.store.accessTokens(accountId: account.accountId, environment: Self.environment, realm: Self.realm).isEmpty)
            #expect(executor.metrics.value("tokenrelay_refresh_total", ["outcome": "fenced_conflict"]) == 1)
        }
    }

    @Test("5. A holder that cannot renew its lease is taken over once it ends; the late holder's answer is fenced out")
    func leaseTakeover() async throws {
        try await Self.withDatabase("refresh_takeover") { db in
            let account = try await db.signIn(refreshToken: "rt-0")
            let start = try #require(try await db.row(account)).generation
            let endpoint = ScriptedEndpoint(hold: [0])
            // A's renewals fail (its database connection is gone): its lease runs out under a live call.
            var replicaA = db.executor(endpoint, store: RenewalsFail(inner: db.store))
            replicaA.leaseSeconds = 1.0
            let replicaB = db.executor(endpoint, store: db.otherStore, metrics: Metrics())
            let late = Task { [replicaA] in try await replicaA.run(db.request(account)) }
            _ = try await endpoint.call(0)
            let leaseEnd = try #require(try await db.row(account)?.leaseExpiresAt)

            let (tokenB, sourceB) = try #require(Self.token(try await replicaB.run(db.request(account, deadline: 5))))
            #expect(sourceB == .refresh)
            let takeover = try #require(endpoint.calls.count == 2 ? endpoint.calls[1] : nil)
            // B asked the STS only once A's lease (claim + 1 s) had passed, with the same generation's token.
            #expect(takeover.startedAt.timeIntervalSince1970 >= leaseEnd)
            #expect(takeover.refreshToken == "rt-0")
            #expect(tokenB.secret == takeover.accessToken)
            #expect(try #require(try await db.row(account)).generation == start + 1)

            endpoint.release(0)
            let (tokenA, sourceA) = try #require(Self.token(try await late.value))
            #expect(sourceA == .refresh)
            #expect(tokenA.secret == endpoint.calls[0].accessToken)
            // B's write won: the chain continues from B's rotation, A's is dropped.
            let row = try #require(try await db.row(account))
            #expect(row.generation == start + 1)
            #expect(row.leaseOwner == nil)
            #expect(try await db.storedRefreshToken(account) == takeover.issuedRefreshToken)
            let lineage = try await db.store.refreshTokenLineage(accountId: account.accountId)
            #expect(lineage.map(\.fingerprint) == [takeover.issuedRefreshToken, "rt-0"].compactMap { $0 }.map(TokenStore.lineageDigest))
            #expect(replicaA.metrics.value("tokenrelay_refresh_total", ["outcome": "fenced_conflict"]) == 1)
            #expect(replicaA.metrics.value("tokenrelay_refresh_total", ["outcome": "rotated"]) == 0)
            #expect(replicaA.metrics.value("tokenrelay_refresh_lease_renewals_total", ["result": "failed"]) >= 1)
            // B knew its claim was a takeover.
            #expect(replicaB.metrics.value("tokenrelay_refresh_claims_total", ["result": "taken_over"]) == 1)
            #expect(replicaB.metrics.value("tokenrelay_refresh_claims_total", ["result": "claimed"]) == 0)
        }
    }

    @Test(
        "5a. A takeover the platform refuses (invalid_grant) while the token refused is still the stored one counts as takeover_refused, not interaction_required"
    )
    func takeoverRefused() async throws {
        try await Self.withDatabase("refresh_takeover_refused") { db in
            let account = try await db.signIn(refreshToken: "rt-0")
            let endpoint = ScriptedEndpoint(hold: [0], script: [1: .fail(.rejected(Self.classify(Self.case01)))])
            var replicaA = db.executor(endpoint, store: RenewalsFail(inner: db.store))
            replicaA.leaseSeconds = 1.0
            let replicaB = db.executor(endpoint, store: db.otherStore, metrics: Metrics())
            let late = Task { [replicaA] in try await replicaA.run(db.request(account)) }
            _ = try await endpoint.call(0)

            let error = try #require(Self.failure(try await replicaB.run(db.request(account, deadline: 5))))
            #expect(error.refreshTokenDied)
            #expect(replicaB.metrics.value("tokenrelay_refresh_claims_total", ["result": "taken_over"]) == 1)
            #expect(replicaB.metrics.value("tokenrelay_refresh_total", ["outcome": "takeover_refused"]) == 1)
            #expect(replicaB.metrics.value("tokenrelay_refresh_total", ["outcome": "interaction_required"]) == 0)
            endpoint.release(0)
            _ = try await late.value
        }
    }

    @Test(
        "5c. A takeover after a database outage waits for the rotation the previous holder could not store, and redeems it, not the token it superseded"
    )
    func takeoverWaitsForPendingRotation() async throws {
        try await Self.withDatabase("refresh_takeover_pending") { db in
            let account = try await db.signIn(refreshToken: "rt-0")
            let start = try #require(try await db.row(account)).generation
            let (endpoint, holderStore, holder) = try await Self.holderWithPendingRotation(db, account)
            let replicaB = db.executor(endpoint, store: db.otherStore, metrics: Metrics())
            let heldLease = try #require(try await db.row(account)?.leaseOwner)

            let takeover = Task { try await replicaB.run(db.request(account, deadline: 10)) }
            // The holder reaches the database again just after the other replica took its lease over.
            try await Self.eventually { try await db.row(account)?.leaseOwner != heldLease }
            holderStore.setDown(false)
            let (token, source) = try #require(Self.token(try await takeover.value))
            #expect(source == .refresh)

            let rotated = try #require(endpoint.calls.first?.issuedRefreshToken)
            #expect(endpoint.calls.count == 2)
            let redeemed = try #require(endpoint.calls.count == 2 ? endpoint.calls[1] : nil)
            #expect(redeemed.refreshToken == rotated, "the takeover presented the refresh token the holder's redemption superseded")
            #expect(token.secret == redeemed.accessToken)
            // One chain: the holder's rotation, then the takeover's.
            try await Self.eventually { holder.pendingRotations.count == 0 }
            #expect(try #require(try await db.row(account)).generation == start + 2)
            #expect(try await db.storedRefreshToken(account) == redeemed.issuedRefreshToken)
            let lineage = try await db.store.refreshTokenLineage(accountId: account.accountId)
            #expect(lineage.map(\.fingerprint) == [redeemed.issuedRefreshToken, rotated, "rt-0"].compactMap { $0 }.map(TokenStore.lineageDigest))
            #expect(replicaB.metrics.value("tokenrelay_refresh_claims_total", ["result": "taken_over"]) == 1)
            #expect(replicaB.metrics.value("tokenrelay_refresh_takeover_rereads_total", ["result": "rotation_stored"]) == 1)
            #expect(replicaB.metrics.value("tokenrelay_refresh_total", ["outcome": "rotated"]) == 1)
        }
    }

    @Test(
        "5d. A takeover refused while the previous holder could not store its rotation yet: once stored, that rotation is redeemed and the account stays active"
    )
    func takeoverRefusedThenRotationStored() async throws {
        try await Self.withDatabase("refresh_takeover_refused_then_stored") { db in
            let account = try await db.signIn(refreshToken: "rt-0")
            let start = try #require(try await db.row(account)).generation
            // Call 1, the takeover's redemption of the superseded rt-0, is refused as strict rotation refuses it.
            let (endpoint, holderStore, holder) = try await Self.holderWithPendingRotation(
                db, account, script: [1: .fail(.rejected(Self.classify(Self.case01)))])
            let replicaB = db.executor(endpoint, store: db.otherStore, metrics: Metrics())

            let takeover = Task { try await replicaB.run(db.request(account, deadline: 15)) }
            // The holder reaches the database only after the other replica's redemption was refused.
            let refused = try await endpoint.call(1)
            #expect(refused.refreshToken == "rt-0")
            holderStore.setDown(false)
            let outcome = try await takeover.value
            let (token, source) = try #require(Self.token(outcome), "\(outcome)")
            #expect(source == .refresh)

            let rotated = try #require(endpoint.calls.first?.issuedRefreshToken)
            #expect(endpoint.calls.count == 3)
            let redeemed = try #require(endpoint.calls.count == 3 ? endpoint.calls[2] : nil)
            #expect(redeemed.refreshToken == rotated)
            #expect(token.secret == redeemed.accessToken)
            #expect(try await db.accountState(account) == "active")
            try await Self.eventually { holder.pendingRotations.count == 0 }
            #expect(try #require(try await db.row(account)).generation == start + 2)
            #expect(try await db.storedRefreshToken(account) == redeemed.issuedRefreshToken)
            #expect(replicaB.metrics.value("tokenrelay_refresh_total", ["outcome": "takeover_refused"]) == 0)
            #expect(replicaB.metrics.value("tokenrelay_refresh_total", ["outcome": "interaction_required"]) == 0)
            #expect(replicaB.metrics.value("tokenrelay_refresh_total", ["outcome": "rotated"]) == 1)
        }
    }

    @Test(
        "5e. A refresh of the replica that holds a rotation it could not store stores it before redeeming it: the chain never ends at a refresh token already presented"
    )
    func ownPendingRotationStoredFirst() async throws {
        try await Self.withDatabase("refresh_pending_stored_first") { db in
            let account = try await db.signIn(refreshToken: "rt-0")
            let start = try #require(try await db.row(account)).generation
            let endpoint = ScriptedEndpoint(hold: [1])
            let store = WritesDown(inner: db.store)
            var replica = db.executor(endpoint, store: store)
            replica.leaseSeconds = 1.0
            // Claims work, writes do not (a primary going away between the two): the rotation is held.
            store.setDown(true)
            #expect(Self.token(try await replica.run(db.request(account)))?.1 == .refresh)
            #expect(replica.pendingRotations.count == 1)
            let rotated = try #require(endpoint.calls.first?.issuedRefreshToken)
            try await Self.eventually {
                guard let end = try await db.row(account)?.leaseExpiresAt else { return false }
                return end < Date().timeIntervalSince1970
            }
            // The replica's next refresh runs while writes still fail; then writes work again, and
            // the held rotation's own persister stores it.
            let finished = Mutex(false)
            let next = Task { [replica] in
                defer { finished.withLock { $0 = true } }
                return try? await replica.run(db.request(account))
            }
            try await Self.eventually { endpoint.calls.count == 2 || finished.withLock { $0 } }
            store.setDown(false)
            try await Self.eventually { try await db.row(account)?.generation == start + 1 }
            endpoint.release(1)
            _ = await next.value
            try await Self.eventually { replica.pendingRotations.count == 0 }
            let stored = try #require(try await db.storedRefreshToken(account))
            #expect(!endpoint.calls.map(\.refreshToken).contains(stored), "the stored refresh token was already redeemed: the chain ends at a used token")

            // And the chain goes on from it.
            let (token, source) = try #require(Self.token(try await replica.run(db.request(account, mode: .bypass))))
            #expect(source == .refresh)
            let last = try #require(endpoint.calls.last)
            #expect(last.refreshToken == stored)
            #expect(token.secret == last.accessToken)
            #expect(try await db.storedRefreshToken(account) == last.issuedRefreshToken)
            let lineage = try await db.store.refreshTokenLineage(accountId: account.accountId)
            #expect(lineage.first?.fingerprint == last.issuedRefreshToken.map(TokenStore.lineageDigest))
            #expect(lineage.contains { $0.fingerprint == TokenStore.lineageDigest(rotated) })
        }
    }

    /// A holder whose database goes away while its call 0 is at the STS: its write fails, the
    /// rotation is held in its memory (pending, retried every 0.25 s), and its 1 s lease runs out
    /// unrenewed. Returns with the database still away for it and its lease expired.
    static func holderWithPendingRotation(
        _ db: Harness, _ account: AccountRecord, script: [Int: ScriptedEndpoint.Answer] = [:]
    ) async throws -> (ScriptedEndpoint, OutageStore, RefreshExecutor) {
        let endpoint = ScriptedEndpoint(hold: [0], script: script)
        let holderStore = OutageStore(inner: db.store)
        var holder = db.executor(endpoint, store: holderStore)
        holder.leaseSeconds = 1.0
        let holding = Task { [holder] in try await holder.run(db.request(account)) }
        _ = try await endpoint.call(0)
        holderStore.setDown(true)
        endpoint.release(0)
        // Served from the STS's answer while the rotation waits in memory.
        #expect(Self.token(try await holding.value)?.1 == .refresh)
        #expect(holder.pendingRotations.count == 1)
        try await Self.eventually {
            guard let end = try await db.row(account)?.leaseExpiresAt else { return false }
            return end < Date().timeIntervalSince1970
        }
        return (endpoint, holderStore, holder)
    }

    @Test("5b. The fenced write knows its own earlier commit, and only its own (not a takeover's of the same token)")
    func alreadyStoredOnlyForTheSameWrite() async throws {
        try await Self.withDatabase("refresh_already_stored") { db in
            let account = try await db.signIn(refreshToken: "rt-0")
            let start = try #require(try await db.row(account)).generation
            func write(_ rotated: String?) -> RotationWrite {
                RotationWrite(
                    accountId: account.accountId, tenantId: account.realm, generation: start, rotatedRefreshToken: rotated, familyId: nil,
                    redeemedFingerprint: TokenStore.lineageDigest("rt-0"), accessToken: nil, notifyAccessTokensReplaced: false)
            }
            #expect(try await db.store.writeRotation(write("rt-A")) == .stored(generation: start + 1))
            // A retry of the same write whose answer was lost: it did commit.
            #expect(try await db.otherStore.writeRotation(write("rt-A")) == .alreadyStored)
            // Another redemption of rt-0 (a holder whose lease was taken over): fenced out, rotated or not.
            #expect(try await db.otherStore.writeRotation(write("rt-B")) == .fencedOut)
            #expect(try await db.otherStore.writeRotation(write(nil)) == .fencedOut)
            #expect(try await db.storedRefreshToken(account) == "rt-A")
            #expect(try #require(try await db.row(account)).generation == start + 1)
        }
    }

    @Test("6. The STS call's end follows the caller's deadline and the client's limits (at least 30 s once sent), not the lease")
    func attemptCutoff() async throws {
        try await Self.withDatabase("refresh_cutoff") { db in
            let account = try await db.signIn(refreshToken: "rt-0")
            let endpoint = ScriptedEndpoint(hold: [0])
            var executor = db.executor(endpoint)
            executor.leaseSeconds = 2
            let running = Task { [executor] in try await executor.run(db.request(account, deadline: 2)) }
            let call = try await endpoint.call(0)
            endpoint.release(0)
            _ = try await running.value

            #expect(call.context.attemptCutoff == nil)
            #expect(call.context.minimumAttemptSeconds == 30)
        }
    }

    @Test("6a. A live holder keeps its lease however long the call takes, renewed every third of it; a shorter call renews nothing")
    func leaseKeptAlive() async throws {
        try await Self.withDatabase("refresh_keep_alive") { db in
            let quick = try await db.signIn(refreshToken: "rt-q", homeAccountId: "uid-q." + Self.realm)
            let slow = try await db.signIn(refreshToken: "rt-0")
            let endpoint = ScriptedEndpoint(hold: [1])
            var replicaA = db.executor(endpoint)
            replicaA.leaseSeconds = 1.5
            // A call shorter than the renewal interval (0.5 s): no renewal statement.
            _ = try #require(Self.token(try await replicaA.run(db.request(quick))))
            #expect(replicaA.metrics.value("tokenrelay_refresh_lease_renewals_total", ["result": "renewed"]) == 0)

            let running = Task { [replicaA] in try await replicaA.run(db.request(slow)) }
            _ = try await endpoint.call(1)
            let owner = try #require(try await db.row(slow)?.leaseOwner)
            // Twice the lease later, A still holds it and B, asking meanwhile, only waits.
            var replicaB = db.executor(endpoint, store: db.otherStore, metrics: Metrics())
            replicaB.leaseSeconds = 1.5
            let refused = try #require(Self.failure(try await replicaB.run(db.request(slow, deadline: 3))))
            #expect(refused.code == .leaseWaitTimeout)
            let held = try #require(try await db.row(slow))
            #expect(held.leaseOwner == owner)
            #expect(endpoint.calls.count == 2, "B redeemed while A's lease was kept alive")
            #expect(replicaB.metrics.value("tokenrelay_refresh_claims_total", ["result": "taken_over"]) == 0)

            endpoint.release(1)
            _ = try #require(Self.token(try await running.value))
            #expect(try await db.row(slow)?.leaseOwner == nil)
            // The cadence is a third of the lease, about six renewals over the 3 s call; a lease of
            // 1.5 s held through it needs at least two, which is what holds whatever the machine's
            // load (a full suite on two cores once left three, and asking for four failed). That B
            // only waited, above, is the lease kept alive.
            #expect(replicaA.metrics.value("tokenrelay_refresh_lease_renewals_total", ["result": "renewed"]) >= 2)
            #expect(replicaA.metrics.value("tokenrelay_refresh_lease_renewals_total", ["result": "lost"]) == 0)
        }
    }

    @Test("6b. At shutdown the leases still held are released, so no other replica waits for them to run out")
    func heldLeasesReleasedAtShutdown() async throws {
        try await Self.withDatabase("refresh_shutdown_release") { db in
            let account = try await db.signIn(refreshToken: "rt-0")
            let endpoint = ScriptedEndpoint(hold: [0])
            let executor = db.executor(endpoint)
            let running = Task { [executor] in try await executor.run(db.request(account)) }
            _ = try await endpoint.call(0)
            #expect(try await db.row(account)?.leaseOwner != nil)
            #expect(executor.held.all.count == 1)

            await executor.releaseHeldLeases()
            #expect(try await db.row(account)?.leaseOwner == nil)
            #expect(executor.held.all.isEmpty)
            endpoint.release(0)
            _ = try await running.value
            #expect(executor.held.all.isEmpty)
        }
    }

    @Test("7a. A dead refresh token (case 01, AADSTS700082): the row is deleted and the account needs interaction")
    func deadRefreshToken() async throws {
        try await Self.withDatabase("refresh_dead") { db in
            let account = try await db.signIn(refreshToken: "rt-0")
            let failure = Self.classify(Self.case01)
            #expect(failure.disposition == .refreshTokenDead)
            let endpoint = ScriptedEndpoint(script: [0: .fail(.rejected(failure))])
            let outcome = try await db.executor(endpoint).run(db.request(account))

            let error = try #require(Self.failure(outcome))
            #expect(error.code == .stsRejected)
            #expect(error.refreshTokenDied)
            #expect(error.failure?.stsErrorCodes == [700082])
            #expect(try await db.row(account) == nil)
            #expect(try await db.accountState(account) == "interaction_required")
            // The next refresh answers at once, without the STS.
            let next = try #require(Self.failure(try await db.executor(endpoint).run(db.request(account))))
            #expect(next.code == .noRefreshToken)
            #expect(endpoint.calls.count == 1)
        }
    }

    @Test("7b. A policy answer (case 02, AADSTS50076) keeps the refresh token and releases the lease")
    func policyFailureKeepsToken() async throws {
        try await Self.withDatabase("refresh_policy") { db in
            let account = try await db.signIn(refreshToken: "rt-0")
            let before = try #require(try await db.row(account))
            let failure = Self.classify(Self.case02)
            #expect(failure.disposition == .interactionRequired)
            let endpoint = ScriptedEndpoint(script: [0: .fail(.rejected(failure))])
            let outcome = try await db.executor(endpoint).run(db.request(account))

            let error = try #require(Self.failure(outcome))
            #expect(error.code == .stsRejected)
            #expect(!error.refreshTokenDied)
            #expect(error.failure?.suberror == "basic_action")
            let after = try #require(try await db.row(account))
            #expect(after.generation == before.generation)
            #expect(after.leaseOwner == nil)
            #expect(try await db.storedRefreshToken(account) == "rt-0")
            #expect(try await db.accountState(account) == "active")
        }
    }

    @Test("7c. A lease whose release failed (the database refused writes) is released once writes work again, not left for the lease's length")
    func failedReleaseIsRetried() async throws {
        try await Self.withDatabase("refresh_release_retry") { db in
            let account = try await db.signIn(refreshToken: "rt-0")
            let endpoint = ScriptedEndpoint(hold: [0], script: [0: .fail(.rejected(Self.classify(Self.case02)))])
            let executor = db.executor(endpoint)
            let run = Task { try await executor.run(db.request(account, deadline: 10)) }
            _ = try await endpoint.call(0)
            #expect(try await db.row(account)?.leaseOwner != nil)
            // A failover's standby for the executor while the STS answers: new sessions of this
            // database are read-only (25006), and the executor's are replaced by new ones.
            let admin = PostgresPool(url: db.url, size: 1)
            defer { admin.close() }
            func setReadOnly(_ on: Bool) async throws {
                try await admin.withConnection { connection in
                    let name = try connection.query("SELECT current_database() AS name").rows.first?.string("name") ?? ""
                    try connection.execute(
                        "ALTER DATABASE \"\(name)\" \(on ? "SET default_transaction_read_only = on" : "RESET default_transaction_read_only")")
                    try connection.query(TestPostgres.terminateOtherSessions)
                }
            }
            try await setReadOnly(true)
            endpoint.release(0)
            #expect(Self.failure(try await run.value)?.code == .stsRejected)
            #expect(try await db.row(account)?.leaseOwner != nil, "the release went through while writes were refused")
            try await setReadOnly(false)
            var released = false
            for _ in 0..<100 where !released {
                try await Task.sleep(for: .milliseconds(50))
                released = try await db.row(account)?.leaseOwner == nil
            }
            #expect(released, "the lease stayed after writes worked again (it would block the account for the rest of its 60 s)")
        }
    }

    @Test("7d. A claim whose answer was lost with the connection (it committed) has its lease released, so the next refresh need not wait it out")
    func claimWithLostAnswerIsReleased() async throws {
        try await Self.withDatabase("refresh_claim_lost") { db in
            let account = try await db.signIn(refreshToken: "rt-0")
            let endpoint = ScriptedEndpoint()
            let lossy = db.executor(endpoint, store: ClaimAnswerLost(inner: db.store))
            await #expect(throws: StoreError.self) { try await lossy.run(db.request(account)) }
            #expect(endpoint.calls.isEmpty)
            var released = false
            for _ in 0..<100 where !released {
                try await Task.sleep(for: .milliseconds(50))
                released = try await db.row(account)?.leaseOwner == nil
            }
            #expect(released, "the lease of the claim whose answer was lost stayed (the account would wait out its 60 s)")
            let (_, source) = try #require(Self.token(try await db.executor(endpoint).run(db.request(account, deadline: 3))))
            #expect(source == .refresh)
        }
    }

    @Test("8. Waiting for another replica's lease ends at the deadline with lease_wait_timeout", .timingGroup(.measuring))
    func leaseWaitTimeout() async throws {
        try await Self.withDatabase("refresh_lease_wait") { db in
            let account = try await db.signIn(refreshToken: "rt-0")
            let endpoint = ScriptedEndpoint(hold: [0])
            let replicaA = db.executor(endpoint, store: db.store)
            let replicaB = db.executor(endpoint, store: db.otherStore, metrics: Metrics())
            let holder = Task { try await replicaA.run(db.request(account)) }
            _ = try await endpoint.call(0)

            // Several deadlines: whether the deadline is met in the wait or in the claim after it is
            // a matter of milliseconds; both must answer lease_wait_timeout (not deadline_passed).
            for deadline in [0.3, 0.12, 0.2, 0.05] {
                let started = Date()
                let outcome = try await replicaB.run(db.request(account, deadline: deadline))
                let elapsed = Date().timeIntervalSince(started)
                let error = try #require(Self.failure(outcome))
                #expect(error.code == .leaseWaitTimeout, "deadline \(deadline) s")
                #expect(elapsed < 1)
            }
            #expect(endpoint.calls.count == 1)
            #expect(replicaB.metrics.value("tokenrelay_refresh_total", ["outcome": "lease_wait_timeout"]) == 4)

            endpoint.release(0)
            #expect(Self.token(try await holder.value)?.1 == .refresh)
        }
    }

    @Test("9. The replica's redemption limit: a refresh over it waits within its deadline, then concurrency_limit")
    func concurrencyLimit() async throws {
        try await Self.withDatabase("refresh_limit") { db in
            let first = try await db.signIn(refreshToken: "rt-first", homeAccountId: "uid-1." + Self.realm)
            let second = try await db.signIn(refreshToken: "rt-second", homeAccountId: "uid-2." + Self.realm)
            let endpoint = ScriptedEndpoint(hold: [0])
            let limiter = RedemptionLimiter(limit: 1)
            let executorA = db.executor(endpoint, limiter: limiter)
            let executorB = db.executor(endpoint, limiter: limiter)
            let holder = Task { try await executorA.run(db.request(first)) }
            _ = try await endpoint.call(0)

            let started = Date()
            let limited = try #require(Self.failure(try await executorB.run(db.request(second, deadline: 0.3))))
            #expect(limited.code == .concurrencyLimit)
            #expect(Date().timeIntervalSince(started) < 1)
            #expect(endpoint.calls.count == 1)
            // The limited refresh claimed nothing.
            #expect(try await db.row(second)?.leaseOwner == nil)

            endpoint.release(0)
            #expect(Self.token(try await holder.value)?.1 == .refresh)
            #expect(limiter.inFlight == 0)
            let third = try await executorB.run(db.request(second, deadline: 2))
            #expect(Self.token(third)?.1 == .refresh)
            #expect(endpoint.calls.map(\.refreshToken) == ["rt-first", "rt-second"])
        }
    }

    // MARK: 10. AcquisitionError → RelayError, one test per row of the table

    @Test("10. sts_rejected: the STS-error table's problem, STS codes kept")
    func problemSTSRejected() throws {
        let failure = Self.classify(Self.case02)
        let problem = RelayError(AcquisitionError.rejected(failure), requestedScopes: Self.scopes)
        #expect(problem.status == 409)
        #expect(problem.code == .interactionRequired)
        #expect(problem.extensions["sts_error_codes"] == .array([.number(50076)]))
        #expect(problem.extensions["suberror"] == .string("basic_action"))
        #expect(problem.extensions["account_state"] == .string("active"))
        #expect(problem.replayable)

        let dead = RelayError(AcquisitionError.rejected(Self.classify(Self.case01)))
        #expect(dead.status == 409)
        #expect(dead.extensions["sts_error_codes"] == .array([.number(700082)]))
        #expect(dead.extensions["account_state"] == .string("interaction_required"))
        #expect(!dead.replayable)

        let lost = RelayError(AcquisitionError(code: .stsRejected))
        #expect(lost.status == 500)
        #expect(lost.code == .internal)
    }

    @Test("10. sts_unavailable: the STS client's problem as it made it")
    func problemSTSUnavailable() throws {
        var made = RelayError(
            .upstreamUnavailable, "The identity provider answered 503.", status: 503,
            extensions: ["sts_error_codes": .array([.number(90033)]), "retry_after_s": .number(7)])
        made.retryAfterSeconds = 7
        made.cause = "sts: 503"
        let problem = RelayError(AcquisitionError.unavailable(made))
        #expect(problem.status == 503)
        #expect(problem.code == .upstreamUnavailable)
        #expect(problem.headers["Retry-After"] == "7")
        #expect(problem.extensions["sts_error_codes"] == .array([.number(90033)]))
        #expect(problem.detail == made.detail)

        let timeout = RelayError(AcquisitionError.unavailable(RelayError.deadlinePassed(before: "identity provider")))
        #expect(timeout.status == 504)
        #expect(timeout.code == .upstreamUnavailable)

        let lost = RelayError(AcquisitionError(code: .stsUnavailable))
        #expect(lost.status == 503)
        #expect(lost.headers["Retry-After"] == "1")
    }

    @Test("10. no_refresh_token: 409 interaction_required, account_state active")
    func problemNoRefreshToken() throws {
        let problem = RelayError(AcquisitionError.noRefreshToken)
        #expect(problem.status == 409)
        #expect(problem.code == .interactionRequired)
        #expect(problem.extensions["account_state"] == .string("active"))
        #expect(problem.headers["Retry-After"] == nil)
        #expect(!problem.replayable)
        #expect(try Self.rendered(problem)["error"] as? String == "interaction_required")
    }

    @Test("10. lease_wait_timeout: 503 upstream_unavailable, Retry-After 1")
    func problemLeaseWaitTimeout() throws {
        try Self.expectUnavailable(RelayError(AcquisitionError.leaseWaitTimeout), status: 503)
    }

    @Test("10. deadline_passed: 504 upstream_unavailable, Retry-After 1")
    func problemDeadlinePassed() throws {
        try Self.expectUnavailable(RelayError(AcquisitionError.deadlinePassed), status: 504)
    }

    @Test("10. concurrency_limit: 503 upstream_unavailable, Retry-After 1")
    func problemConcurrencyLimit() throws {
        try Self.expectUnavailable(RelayError(AcquisitionError.concurrencyLimit), status: 503)
    }

    @Test("10. unexpected: 500 internal, the error only in the log cause")
    func problemUnexpected() throws {
        let problem = RelayError(AcquisitionError.unexpected)
        #expect(problem.status == 500)
        #expect(problem.code == .internal)
        #expect(problem.cause == AcquisitionError.unexpected.description)
        #expect(try Self.rendered(problem)["error"] as? String == "internal")
    }

    @Test("10. refreshOutcome labels per code and STS disposition", arguments: STSFailure.Disposition.allCases)
    func refreshOutcomePerDisposition(_ disposition: STSFailure.Disposition) {
        let expected: String
        switch disposition {
        case .refreshTokenDead, .interactionRequired, .userCanceled: expected = "interaction_required"
        case .throttled: expected = "throttled"
        case .clientCredentialRejected, .transient, .nonRetryableServer, .badRequest: expected = "upstream_error"
        }
        let failure = STSFailure(disposition: disposition, problem: .upstreamError, detail: "x")
        #expect(AcquisitionError.rejected(failure).refreshOutcome == expected)
    }

    @Test("10. refreshOutcome labels per code", arguments: AcquisitionError.Code.allCases)
    func refreshOutcomePerCode(_ code: AcquisitionError.Code) {
        let expected: String
        switch code {
        case .stsRejected, .stsUnavailable, .unexpected: expected = "upstream_error"
        case .noRefreshToken: expected = "interaction_required"
        case .leaseWaitTimeout, .deadlinePassed: expected = "lease_wait_timeout"
        case .concurrencyLimit: expected = "concurrency_limit"
        }
        #expect(AcquisitionError(code: code).refreshOutcome == expected)
    }

    // MARK: Helpers

    static func expectUnavailable(_ problem: RelayError, status: Int) throws {
        #expect(problem.status == status)
        #expect(problem.code == .upstreamUnavailable)
        #expect(problem.headers["Retry-After"] == "1")
        #expect(problem.extensions["retry_after_s"] == .number(1))
        let json = try rendered(problem)
        #expect(json["error"] as? String == "upstream_unavailable")
        #expect(json["status"] as? Int == status)
    }

    static func rendered(_ problem: RelayError) throws -> [String: Any] {
        let response = problem.response(correlationId: "c-1")
        return try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
    }

    static func token(_ outcome: RefreshExecutor.Outcome) -> (StoredAccessToken, SilentTokenResult.Source)? {
        if case .token(let token, _, let source) = outcome { return (token, source) }
        return nil
    }

    static func failure(_ outcome: RefreshExecutor.Outcome) -> AcquisitionError? {
        if case .failure(let error) = outcome { return error }
        return nil
    }

    /// Polls `condition` every 10 ms for up to 20 s (generous: a loaded 2-core CI machine).
    static func eventually(_ condition: () async throws -> Bool) async throws {
        let until = Date().addingTimeInterval(20)
        while !(try await condition()) {
            guard Date() < until else {
                Issue.record("condition not met within 20 s")
                return
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    static func classify(_ response: (status: Int, headers: [(String, String)], body: String)) -> STSFailure {
        STSErrorMapping.classify(status: response.status, headers: response.headers, body: Array(response.body.utf8), now: Date())
    }

    /// shared/cases/01-aadsts700082-refresh-token-inactive-bad-token.json (its response).
    static let case01: (status: Int, headers: [(String, String)], body: String) = (
        400, [("Content-Type", "application/json; charset=utf-8"), ("x-ms-request-id", "1a1a1a1a-0000-4000-8000-000000000001")],
        #"""
        {
          "error": "invalid_grant",
          "error_description": "AADSTS700082: The refresh token has expired due to inactivity. The token was issued on 2026-05-20T16:18:37.2732417Z and was inactive for 90.00:00:00. Trace ID: 1a1a1a1a-0000-4000-8000-000000000001 Correlation ID: 2b2b2b2b-0000-4000-8000-000000000001 Timestamp: 2026-08-26 10:12:51Z",
          "error_codes": [700082],
          "timestamp": "2026-08-26 10:12:51Z",
          "trace_id": "1a1a1a1a-0000-4000-8000-000000000001",
          "correlation_id": "2b2b2b2b-0000-4000-8000-000000000001",
          "error_uri": "https://login.microsoftonline.com/error?code=700082",
          "suberror": "bad_token"
        }
        """#
    )

    /// shared/cases/02-aadsts50076-mfa-required-basic-action-keep-rt.json (its response).
    static let case02: (status: Int, headers: [(String, String)], body: String) = (
        400, [("Content-Type", "application/json; charset=utf-8"), ("x-ms-request-id", "1a1a1a1a-0000-4000-8000-000000000002")],
        #"""
        {
          "error": "invalid_grant",
          "error_description": "AADSTS50076: Due to a configuration change made by your administrator, or because you moved to a new location, you must use multi-factor authentication to access '00000003-0000-0000-c000-000000000000'. Trace ID: 1a1a1a1a-0000-4000-8000-000000000002 Correlation ID: 2b2b2b2b-0000-4000-8000-000000000002 Timestamp: 2025-02-12 15:57:00Z",
          "error_codes": [50076],
          "timestamp": "2025-02-12 15:57:00Z",
          "trace_id": "1a1a1a1a-0000-4000-8000-000000000002",
          "correlation_id": "2b2b2b2b-0000-4000-8000-000000000002",
          "error_uri": "https://login.microsoftonline.com/error?code=50076",
          "suberror": "basic_action"
        }
        """#
    )

    /// A fresh database with the migrations applied, and two stores on it (two replicas' pools).
    static func withDatabase(_ name: String, _ body: (Harness) async throws -> Void) async throws {
        try await TestPostgres.withFreshDatabase(named: name) { url in
            let pool = PostgresPool(url: url, size: 2)
            let otherPool = PostgresPool(url: url, size: 2)
            defer {
                pool.close()
                otherPool.close()
            }
            _ = try await Migrator(directory: BuiltProducts.packageRoot() + "/migrations").apply(on: pool)
            let cipher = TokenCipher(ring: try KeyRing(parsing: KeyRing.generateEntry(id: "k1")))
            let authority = try AuthorityValidator(knownAuthorities: [], allowHTTPLoopback: false).validate("https://login.microsoftonline.com/" + realm)
            try await body(
                Harness(
                    store: TokenStore(database: Database(pool: pool), clientId: clientId, cipher: cipher),
                    otherStore: TokenStore(database: Database(pool: otherPool), clientId: clientId, cipher: cipher), pool: pool,
                    authority: authority, url: url))
        }
    }

    struct Harness: Sendable {
        let store: TokenStore
        /// Another replica's store: the same database through its own pool.
        let otherStore: TokenStore
        let pool: PostgresPool
        let authority: Authority
        /// The database's URL (for a connection of the test's own).
        let url: String

        struct Row: Sendable, Equatable {
            let generation: Int64
            let leaseOwner: String?
            /// Unix seconds (PostgreSQL's clock).
            let leaseExpiresAt: Double?
        }

        /// A sign-in as the callback stores it (one transaction; a returning user keeps its account).
        func signIn(refreshToken: String, homeAccountId: String = "uid-1." + RefreshExecutorTests.realm) async throws -> AccountRecord {
            try await store.saveSignIn(
                SignedInAccount(
                    environment: RefreshExecutorTests.environment, homeAccountId: homeAccountId, realm: RefreshExecutorTests.realm,
                    localAccountId: String(homeAccountId.prefix { $0 != "." }), username: "ada@contoso.com", name: "Ada", authority: authority,
                    idTokenClaims: "{}"),
                refreshToken: refreshToken, familyId: nil, accessToken: nil, actor: "bootstrap"
            ).account
        }

        func executor(
            _ endpoint: ScriptedEndpoint, store: (any RefreshTokenStore)? = nil, limiter: RedemptionLimiter = RedemptionLimiter(limit: 8),
            metrics: Metrics = Metrics()
        ) -> RefreshExecutor {
            RefreshExecutor(
                store: store ?? self.store, endpoint: endpoint, clientId: RefreshExecutorTests.clientId, expirySkewSeconds: 300, limiter: limiter,
                waiters: LeaseWaiters(), pendingRotations: PendingRotations(), tasks: BackgroundTasks(), metrics: metrics,
                logger: Logger(level: .error, logPII: false, sink: .memory()),
                now: { Int(Date().timeIntervalSince1970) })
        }

        /// `deadline` defaults to 30 s: in tests 3a/3b the waiting replica's deadline spans a Task
        /// start, the poll for `held_elsewhere` and the release, which on a loaded 2-core CI
        /// machine once passed 5 s (the waiter answered deadline_passed). Tests about deadlines
        /// pass their own.
        func request(_ account: AccountRecord, mode: RefreshStateMachine.Mode = .cacheFirst, deadline: Double = 30) -> RefreshExecutor.Request {
            RefreshExecutor.Request(
                account: account, authority: authority, realm: account.realm, scopes: RefreshExecutorTests.scopes, claims: nil, mode: mode, minTTL: 0,
                context: RequestContext(correlationId: UUID().uuidString, deadline: Date().addingTimeInterval(deadline), caller: nil, access: .unrestricted))
        }

        func row(_ account: AccountRecord) async throws -> Row? {
            let id = account.accountId
            return try await pool.withConnection { connection in
                try connection.query(
                    """
                    SELECT generation, lease_owner, extract(epoch FROM lease_expires_at)::text AS lease_expires_at
                    FROM refresh_tokens WHERE account_id = $1
                    """, [.text(id)]
                ).rows.first.map { row in
                    Row(
                        generation: row.int("generation") ?? -1, leaseOwner: row.string("lease_owner"),
                        leaseExpiresAt: row.string("lease_expires_at").flatMap(Double.init))
                }
            }
        }

        func storedRefreshToken(_ account: AccountRecord) async throws -> String? {
            let store = self.store
            let id = account.accountId
            return try await store.database.run { connection in try store.refreshToken(in: connection, accountId: id)?.token }
        }

        func accountState(_ account: AccountRecord) async throws -> String? {
            let id = account.accountId
            return try await pool.withConnection { connection in
                try connection.query("SELECT state FROM accounts WHERE account_id = $1", [.text(id)]).rows.first?.string("state")
            }
        }
    }
}

/// The STS's token endpoint, scripted: every redemption is recorded with the token and context
/// it was given; it answers as the STS does (a new access token and, rotating, a new refresh
/// token each time) unless the script says otherwise; calls listed in `hold` stay in flight until
/// the test releases them.
final class ScriptedEndpoint: TokenEndpoint {
    enum Answer: Sendable {
        /// Tokens with a new refresh token.
        case rotate
        /// Tokens without a refresh token (case 14).
        case keep
        case fail(STSCallError)
    }

    struct Call: Sendable {
        let refreshToken: String
        let context: RequestContext
        let startedAt: Date
        var answeredAt: Date?
        var accessToken: String?
        var issuedRefreshToken: String?
    }

    private struct State: Sendable {
        var calls: [Call] = []
        var script: [Int: Answer]
        var hold: Set<Int>
        var gates: [Int: CheckedContinuation<Void, Never>] = [:]
        var released: Set<Int> = []
    }

    private let state: Mutex<State>

    init(hold: Set<Int> = [], script: [Int: Answer] = [:]) {
        state = Mutex(State(script: script, hold: hold))
    }

    var calls: [Call] { state.withLock { $0.calls } }

    func redeem(
        refreshToken: String, authority: Authority, scopes: ScopeSet, claims: String?, context: RequestContext, account: String
    ) async -> Result<TokenResponse, STSCallError> {
        let (index, held) = state.withLock { state in
            state.calls.append(Call(refreshToken: refreshToken, context: context, startedAt: Date()))
            return (state.calls.count - 1, state.hold.contains(state.calls.count - 1))
        }
        if held {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let go = state.withLock { state -> Bool in
                    if state.released.contains(index) { return true }
                    state.gates[index] = continuation
                    return false
                }
                if go { continuation.resume() }
            }
        }
        return state.withLock { state in
            state.calls[index].answeredAt = Date()
            let accessToken = "at-\(index)-" + UUID().uuidString
            switch state.script[index] ?? .rotate {
            case .rotate:
                let rotated = "rt-\(index + 1)-" + UUID().uuidString
                state.calls[index].accessToken = accessToken
                state.calls[index].issuedRefreshToken = rotated
                return .success(
                    TokenResponse(
                        accessToken: accessToken, expiresIn: 3600, extExpiresIn: 3600, scope: "User.Read openid profile email", refreshToken: rotated))
            case .keep:
                state.calls[index].accessToken = accessToken
                return .success(TokenResponse(accessToken: accessToken, expiresIn: 3599, extExpiresIn: 3599, scope: "User.Read openid profile email"))
            case .fail(let error):
                return .failure(error)
            }
        }
    }

    /// Lets held call `index` answer (now, or as soon as it arrives).
    func release(_ index: Int) {
        let gate = state.withLock { state in
            state.released.insert(index)
            return state.gates.removeValue(forKey: index)
        }
        gate?.resume()
    }

    /// Call `index` once it has arrived (waits up to 20 s).
    func call(_ index: Int) async throws -> Call {
        let until = Date().addingTimeInterval(20)
        while true {
            if let call = state.withLock({ $0.calls.count > index ? $0.calls[index] : nil }) { return call }
            guard Date() < until else { throw CancellationError() }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}

/// The real store, except that every lease renewal fails as a lost connection does: a holder
/// whose lease runs out under a live call.
final class RenewalsFail: RefreshTokenStore, Sendable {
    let inner: TokenStore

    init(inner: TokenStore) { self.inner = inner }

    func claimRefresh(_ claim: RefreshClaimRequest) async throws -> RefreshClaim { try await inner.claimRefresh(claim) }

    func writeRotation(_ write: RotationWrite) async throws -> RotationWriteOutcome { try await inner.writeRotation(write) }

    func releaseRefreshLease(accountId: String, owner: String) async throws {
        try await inner.releaseRefreshLease(accountId: accountId, owner: owner)
    }

    func renewRefreshLease(accountId: String, owner: String, leaseSeconds: Double) async throws -> Bool {
        throw StoreError(PostgresError(code: .connectionFailure, function: "PQexecParams"))
    }

    func markRefreshTokenDead(accountId: String, generation: Int64, stsErrorCodes: [Int]) async throws -> Bool {
        try await inner.markRefreshTokenDead(accountId: accountId, generation: generation, stsErrorCodes: stsErrorCodes)
    }

    func accessTokens(accountId: String, environment: String, realm: String) async throws -> [StoredAccessToken] {
        try await inner.accessTokens(accountId: accountId, environment: environment, realm: realm)
    }
}

/// The real store behind a switch for writes alone: while down, the fenced write fails as a lost
/// connection does, and claims, renewals and releases still work (a primary that goes away
/// between a claim and the write, and a replica whose claim reaches the new one first).
final class WritesDown: RefreshTokenStore, Sendable {
    let inner: TokenStore
    private let down = Mutex(false)

    init(inner: TokenStore) { self.inner = inner }

    func setDown(_ value: Bool) { down.withLock { $0 = value } }

    func claimRefresh(_ claim: RefreshClaimRequest) async throws -> RefreshClaim { try await inner.claimRefresh(claim) }

    func writeRotation(_ write: RotationWrite) async throws -> RotationWriteOutcome {
        if down.withLock({ $0 }) { throw StoreError(PostgresError(code: .connectionFailure, function: "PQexecParams")) }
        return try await inner.writeRotation(write)
    }

    func releaseRefreshLease(accountId: String, owner: String) async throws {
        try await inner.releaseRefreshLease(accountId: accountId, owner: owner)
    }

    func renewRefreshLease(accountId: String, owner: String, leaseSeconds: Double) async throws -> Bool {
        try await inner.renewRefreshLease(accountId: accountId, owner: owner, leaseSeconds: leaseSeconds)
    }

    func markRefreshTokenDead(accountId: String, generation: Int64, stsErrorCodes: [Int]) async throws -> Bool {
        try await inner.markRefreshTokenDead(accountId: accountId, generation: generation, stsErrorCodes: stsErrorCodes)
    }

    func accessTokens(accountId: String, environment: String, realm: String) async throws -> [StoredAccessToken] {
        try await inner.accessTokens(accountId: accountId, environment: environment, realm: realm)
    }
}

/// The real store, except that the first claim's answer is lost after the claim committed, as
/// when the primary goes away between COMMIT and the reply (a connection failure after sending).
final class ClaimAnswerLost: RefreshTokenStore, Sendable {
    let inner: TokenStore
    private let lost = Mutex(false)

    init(inner: TokenStore) { self.inner = inner }

    func claimRefresh(_ claim: RefreshClaimRequest) async throws -> RefreshClaim {
        let result = try await inner.claimRefresh(claim)
        guard
            lost.withLock({ lost in
                defer { lost = true }; return !lost
            })
        else { return result }
        throw StoreError(PostgresError(code: .connectionFailure, function: "PQexecParams"))
    }

    func writeRotation(_ write: RotationWrite) async throws -> RotationWriteOutcome { try await inner.writeRotation(write) }

    func releaseRefreshLease(accountId: String, owner: String) async throws {
        try await inner.releaseRefreshLease(accountId: accountId, owner: owner)
    }

    func renewRefreshLease(accountId: String, owner: String, leaseSeconds: Double) async throws -> Bool {
        try await inner.renewRefreshLease(accountId: accountId, owner: owner, leaseSeconds: leaseSeconds)
    }

    func markRefreshTokenDead(accountId: String, generation: Int64, stsErrorCodes: [Int]) async throws -> Bool {
        try await inner.markRefreshTokenDead(accountId: accountId, generation: generation, stsErrorCodes: stsErrorCodes)
    }

    func accessTokens(accountId: String, environment: String, realm: String) async throws -> [StoredAccessToken] {
        try await inner.accessTokens(accountId: accountId, environment: environment, realm: realm)
    }
}
