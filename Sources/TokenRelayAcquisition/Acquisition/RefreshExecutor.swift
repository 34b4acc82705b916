import Foundation
import IdentityCore
import Synchronization
import TokenRelayBase
import TokenRelayStore
import TokenRelayUpstream

/// Performs what ``RefreshStateMachine`` decides (ADR 0012): claim the account's redemption
/// lease in one statement, redeem the refresh token with nothing of PostgreSQL held, store the
/// rotation with one fenced statement. Coalescing within the replica is the caller's
/// (`RefreshCoalescer`); this type is one redemption chain's link.
package struct RefreshExecutor: Sendable {
    package let store: any RefreshTokenStore
    package let endpoint: any TokenEndpoint
    package let clientId: String
    package let expirySkewSeconds: Int
    package let limiter: RedemptionLimiter
    package let waiters: LeaseWaiters
    /// Rotations the STS returned that could not be stored yet (see ``persistAlone(_:)``).
    package let pendingRotations: PendingRotations
    /// Owns what outlives a redemption (lease releases retried, rotations not stored yet) and
    /// the coalesced refreshes themselves, so a shutdown drains them.
    package let tasks: BackgroundTasks
    package let metrics: Metrics
    package let logger: Logger
    package let now: @Sendable () -> Int
    /// The waiting clock (``UpstreamClock``): how long the token endpoint took, and the windows
    /// of the retried lease release and the pending rotation's persister.
    package let waiting: UpstreamClock
    /// How long a lease holds unless renewed, seconds (`TOKENRELAY_REFRESH_LEASE_S`, default 5):
    /// how long a dead holder keeps the account from every replica. The holder renews it every
    /// third of that while its token-endpoint call runs (``renewalIntervalSeconds``).
    package var leaseSeconds: Double = 5
    /// The longest wait between two claims while another redemption holds the lease, seconds:
    /// the fallback when its `refresh.released` notification does not arrive.
    package var pollSeconds: Double = 0.25
    /// How long a takeover waits before it redeems, seconds (default 1): the previous holder may
    /// hold a rotation it could not store while the database was away, and stores it within a
    /// fraction of a second of reaching the database again (its pending write is retried every
    /// 0.25 s). Ended at once when it does; a takeover after a crash waits it out.
    package var takeoverWaitSeconds: Double = 1
    /// The leases this replica holds, released at a shutdown (``releaseHeldLeases()``).
    package let held: HeldLeases

    package init(
        store: any RefreshTokenStore, endpoint: any TokenEndpoint, clientId: String, expirySkewSeconds: Int, limiter: RedemptionLimiter, waiters: LeaseWaiters,
        pendingRotations: PendingRotations, tasks: BackgroundTasks, metrics: Metrics, logger: Logger, now: @escaping @Sendable () -> Int,
        leaseSeconds: Double = 5, pollSeconds: Double = 0.25, held: HeldLeases = HeldLeases(), waiting: UpstreamClock = .system
    ) {
        self.waiting = waiting
        self.store = store
        self.endpoint = endpoint
        self.clientId = clientId
        self.expirySkewSeconds = expirySkewSeconds
        self.limiter = limiter
        self.waiters = waiters
        self.pendingRotations = pendingRotations
        self.tasks = tasks
        self.metrics = metrics
        self.logger = logger
        self.now = now
        self.leaseSeconds = leaseSeconds
        self.pollSeconds = pollSeconds
        self.held = held
    }

    /// Seconds between two renewals of a lease while its token-endpoint call runs: a third of
    /// the lease, so two renewals in a row may fail (a slow statement, a pool wait) before it
    /// runs out. A call shorter than this issues no renewal.
    package var renewalIntervalSeconds: Double { leaseSeconds / 3 }

    /// TokenRelay's own waits (for a redemption slot, for another redemption's lease) end this
    /// long before the caller's deadline, so the caller gets their 503 with Retry-After, which
    /// says why, rather than the coalescer's 504 "deadline passed" that fires at the deadline.
    package static let ownWaitMarginSeconds = 0.1

    /// One refresh of one account's tokens for one scope set.
    package struct Request: Sendable {
        package let account: AccountRecord
        package let authority: Authority
        package let realm: String
        package let scopes: ScopeSet
        /// The merged claims sent to the STS (caller's challenge and client capabilities).
        package let claims: String?
        package let mode: RefreshStateMachine.Mode
        /// `min_ttl_s` of the request, seconds.
        package let minTTL: Int
        /// The initiating request's context: its deadline bounds waiting (for a slot, for
        /// another replica's lease), never the STS call once sent.
        package let context: RequestContext

        package init(
            account: AccountRecord, authority: Authority, realm: String, scopes: ScopeSet, claims: String?, mode: RefreshStateMachine.Mode, minTTL: Int,
            context: RequestContext
        ) {
            self.account = account
            self.authority = authority
            self.realm = realm
            self.scopes = scopes
            self.claims = claims
            self.mode = mode
            self.minTTL = minTTL
            self.context = context
        }
    }

    /// What one refresh produced, shared by every request that joined it.
    package enum Outcome: Sendable {
        case token(StoredAccessToken, declined: [String], source: SilentTokenResult.Source)
        case failure(AcquisitionError)
    }

    /// Runs one refresh to its end.
    /// - Throws: `RelayError` when the database fails before the STS is asked (503 while it is
    ///   unreachable); after the STS answered, nothing is thrown: the rotation is kept (stored, or
    ///   pending in this replica) and the token served.
    package func run(_ request: Request) async throws -> Outcome {
        guard await limiter.acquire(until: request.context.deadline.addingTimeInterval(-Self.ownWaitMarginSeconds)) else {
            metrics.increment("tokenrelay_refresh_total", ["outcome": AcquisitionError.concurrencyLimit.refreshOutcome])
            return .failure(.concurrencyLimit)
        }
        defer { limiter.release() }
        let accountId = request.account.accountId
        let owner = Self.newLeaseOwner()
        var machine = RefreshStateMachine(mode: request.mode)
        var action = machine.start()
        var redeemed: (token: String, generation: Int64)?
        var secondsLeftOnHeldLease = 0.0
        var answer: (response: TokenResponse, token: StoredAccessToken, granted: ScopeSet, declined: [String])?
        var failure = AcquisitionError.unexpected
        var cached: StoredAccessToken?
        var rotated = false
        /// The owner of the lease this claim took over when it had run out (nil: it was free).
        var takenOverFrom: String?

        /// Carries on from what the previous holder left after a takeover (``awaitPreviousHolder``):
        /// nil when the stored token is unchanged, else the machine's next action.
        func follow(_ found: PreviousHolderRotation) -> RefreshStateMachine.Action? {
            switch found {
            case .unchanged: return nil
            case .stored(let token, let newer):
                redeemed = (token, newer)
                takenOverFrom = nil
                return machine.reread(generation: newer)
            case .leaseLost:
                held.ended(owner: owner)
                return machine.leaseLost()
            }
        }
        while true {
            switch action {
            case .claim(let checkCache):
                guard request.context.remainingSeconds > 0 else {
                    action = machine.deadlinePassed()
                    continue
                }
                let claim = RefreshClaimRequest(
                    accountId: accountId, environment: request.account.environment, realm: request.realm, scopes: request.scopes,
                    checkCache: checkCache, acceptRefreshDue: request.mode == .cacheFirst,
                    minimumExpiresOn: now() + max(expirySkewSeconds, request.minTTL), now: now(), owner: owner, leaseSeconds: leaseSeconds)
                let claimResult: RefreshClaim
                do {
                    claimResult = try await store.claimRefresh(claim)
                } catch let error as StoreError where error.outcomeUnknown {
                    // The claim may have committed with its answer lost (the primary went away
                    // mid-reply): free the lease it may hold once the database answers, rather
                    // than leave the account blocked for the lease's length.
                    releaseInBackground(accountId: accountId, owner: owner)
                    throw error
                }
                metrics.increment("tokenrelay_refresh_claims_total", ["result": claimResult.metricLabel])
                switch claimResult {
                case .claimed(let token, let generation, let previousOwner):
                    held.hold(accountId: accountId, owner: owner)
                    redeemed = (token, generation)
                    // Per claim: a later claim of the same refresh (after a fenced-out write) may be an ordinary one.
                    takenOverFrom = previousOwner
                    if let previousOwner {
                        // A crash's cost, not a user's: the holder died (or could not renew) mid-redemption.
                        logger.warn(
                            "token.lease_taken_over",
                            ["account.id": accountId, "lease.previous_holder": Self.replica(ofOwner: previousOwner), "refresh.generation": String(generation)])
                    }
                    action = machine.claimed(generation: generation)
                case .heldElsewhere(let secondsLeft):
                    secondsLeftOnHeldLease = secondsLeft
                    action = machine.heldElsewhere()
                case .freshTokenStored:
                    action = machine.freshTokenStored()
                case .noRefreshToken:
                    failure = .noRefreshToken
                    action = machine.noRefreshToken()
                }

            case .readCache:
                let stored = try await store.accessTokens(accountId: accountId, environment: request.account.environment, realm: request.realm)
                cached = stored.best(
                    covering: request.scopes, now: now(), expirySkew: expirySkewSeconds, minTTL: request.minTTL,
                    acceptRefreshDue: request.mode == .cacheFirst)
                action = machine.cachedRead(usable: cached != nil)

            case .wait:
                let remaining = request.context.remainingSeconds - Self.ownWaitMarginSeconds
                guard remaining > 0 else {
                    failure = .leaseWaitTimeout
                    action = machine.deadlinePassed()
                    continue
                }
                // Woken by the holder's release; else poll, and at the latest when its lease ends.
                await waitForHolder(
                    accountId: accountId, secondsLeftOnLease: secondsLeftOnHeldLease,
                    deadline: request.context.deadline.addingTimeInterval(-Self.ownWaitMarginSeconds))
                metrics.increment("tokenrelay_refresh_lease_waits_total")
                // The wait ends at the deadline at the latest: if it passed meanwhile, the lease was
                // still held then (lease_wait_timeout; a claim would answer deadline_passed).
                guard request.context.remainingSeconds > 0 else {
                    failure = .leaseWaitTimeout
                    action = machine.deadlinePassed()
                    continue
                }
                action = machine.holderFinished()

            case .redeem(let generation):
                guard let (storedToken, _) = redeemed else { return .failure(.unexpected) }
                // The stored token may have been superseded by a rotation this replica could not store
                // yet: store that first, then redeem what is stored. Redeeming it unstored would race
                // its persister: a rotation of it fenced on `generation` is fenced out once the
                // persister moves the row on, and the chain is left at a token already redeemed.
                let pending = pendingRotations.entry(for: accountId, replacing: generation)
                if let write = pending?.write {
                    do {
                        _ = try await store.writeRotation(write)  // stored, or stored already, or the chain moved on
                        pendingRotations.release(accountId: accountId, replacing: generation)
                        // The write released the lease: take it again, with what is stored now.
                        let reread = try await store.claimRefresh(rereadClaim(request, owner: owner))
                        logger.warn("token.pending_rotation_stored", ["account.id": accountId])
                        if case .claimed(let token, let stored, _) = reread {
                            redeemed = (token, stored)
                            takenOverFrom = nil
                            action = machine.reread(generation: stored)
                        } else {
                            held.ended(owner: owner)
                            action = machine.leaseLost()
                        }
                    } catch {
                        releaseInBackground(accountId: accountId, owner: owner)
                        throw error
                    }
                    continue
                }
                if let previousOwner = takenOverFrom, pending == nil {
                    // The previous holder may have redeemed the stored token and hold its successor,
                    // unstored while the database was away: give it a moment to store it first, so
                    // no superseded token is presented (a platform may revoke a chain on reuse).
                    let found: PreviousHolderRotation
                    do {
                        found = try await awaitPreviousHolder(
                            request, owner: owner, generation: generation, seconds: takeoverWaitSeconds, previousOwner: previousOwner)
                    } catch {
                        releaseInBackground(accountId: accountId, owner: owner)
                        throw error
                    }
                    if let next = follow(found) {
                        action = next
                        continue
                    }
                }
                let token = pending?.token ?? storedToken
                redeemed = (token, generation)
                let context = redemptionContext(request.context)
                let started = waiting.now()
                let result = await keepingLeaseAlive(accountId: accountId, owner: owner) {
                    await endpoint.redeem(
                        refreshToken: token, authority: request.authority, scopes: request.scopes, claims: request.claims, context: context,
                        account: accountId)
                }
                metrics.observe("tokenrelay_refresh_sts_seconds", seconds: waiting.now().timeIntervalSince(started))
                switch result {
                case .success(let response):
                    let granted = ScopeRules.granted(response.scope, requested: request.scopes)
                    let token = StoredAccessToken(
                        response, accountId: accountId, environment: request.account.environment, realm: request.realm, clientId: clientId,
                        scopes: granted.canonical, issuedAt: now(), obtainedBy: request.context.caller)
                    answer = (response, token, granted, ScopeRules.declined(requested: request.scopes, granted: granted))
                    rotated = response.refreshToken.map { !$0.isEmpty } ?? false
                    action = machine.stsAnswered()
                case .failure(.rejected(let rejected)):
                    failure = .rejected(rejected)
                    if rejected.disposition == .refreshTokenDead, let previousOwner = takenOverFrom {
                        // A takeover's refusal is the user's only if the token refused is still the
                        // latest: the previous holder may store the rotation it holds once it reaches
                        // the database again (its own reconnection may come after this replica's).
                        // Unreadable now: treated as unchanged, as before this wait existed.
                        let found =
                            (try? await awaitPreviousHolder(
                                request, owner: owner, generation: generation, seconds: leaseSeconds, previousOwner: previousOwner)) ?? .unchanged
                        // A rotation found is redeemed once more, as an ordinary redemption: a
                        // refusal of the latest stored token is the user's (interaction_required).
                        if let next = follow(found) {
                            action = next
                            continue
                        }
                    }
                    action = machine.stsFailed(refreshTokenDead: rejected.disposition == .refreshTokenDead)
                case .failure(.unavailable(let problem)):
                    failure = .unavailable(problem)
                    action = machine.stsFailed(refreshTokenDead: false)
                }

            case .storeRotation(let generation):
                guard let answer, let redeemed else { return .failure(.unexpected) }
                let write = rotationWrite(
                    answer.response, generation: generation, redeemed: redeemed.token, accessToken: answer.token, target: answer.granted, request: request)
                do {
                    let outcome = try await store.writeRotation(write)
                    // Stored (the write cleared the lease) or fenced out (the row moved on without it).
                    held.ended(owner: owner)
                    switch outcome {
                    case .stored, .alreadyStored: action = machine.stored()
                    case .fencedOut:
                        logger.warn("token.rotation_fenced_out", ["account.id": accountId, "refresh.generation": String(generation)])
                        metrics.increment("tokenrelay_refresh_total", ["outcome": "fenced_conflict"])
                        action = machine.fencedOut()
                    }
                } catch {
                    logger.error("token.rotation_write_failed", ["account.id": accountId, "error": String(describing: error)])
                    action = machine.commitFailed()
                }

            case .persistAlone(let generation):
                guard let answer, let redeemed else { return .failure(.unexpected) }
                let write = rotationWrite(answer.response, generation: generation, redeemed: redeemed.token, accessToken: nil, target: nil, request: request)
                let persisted = await persistAlone(write)
                // Stored, fenced out, or held in memory: the lease, no longer renewed, ends by itself.
                held.ended(owner: owner)
                switch persisted {
                case true?: action = machine.stored()
                case false?: action = machine.fencedOut()
                case nil: action = machine.commitFailed()
                }

            case .markDead(let generation):
                let codes = (failure.failure?.stsErrorCodes ?? []).map(String.init).joined(separator: ",")
                if let takenOverFrom {
                    // Most likely the dead holder's redemption rotated the token and its successor
                    // died with it: the platform refused the superseded one (strict rotation).
                    logger.warn(
                        "token.takeover_refused",
                        ["account.id": accountId, "lease.previous_holder": Self.replica(ofOwner: takenOverFrom), "sts.error_codes": codes])
                }
                do {
                    if try await store.markRefreshTokenDead(accountId: accountId, generation: generation, stsErrorCodes: failure.failure?.stsErrorCodes ?? []) {
                        logger.info("account.interaction_required", ["account.id": accountId, "sts.error_codes": codes])
                    }
                    held.ended(owner: owner)
                } catch {
                    // The lease ends by itself; the next refresh meets the same answer and tries again.
                    logger.error("token.mark_dead_failed", ["account.id": accountId, "error": String(describing: error)])
                }
                action = machine.deadMarked()

            case .serve(let source, let releaseLease):
                if releaseLease { await release(accountId: accountId, owner: owner) }
                waiters.wake(accountId: accountId)
                if source == .cache, let cached { return .token(cached, declined: [], source: .cache) }
                guard let answer else { return .failure(.unexpected) }
                if !releaseLease { metrics.increment("tokenrelay_refresh_total", ["outcome": rotated ? "rotated" : "no_rotation"]) }
                return .token(answer.token, declined: answer.declined, source: .refresh)

            case .answerProblem(let reason, let releaseLease):
                if releaseLease { await release(accountId: accountId, owner: owner) }
                waiters.wake(accountId: accountId)
                let error: AcquisitionError
                switch reason {
                case .noRefreshToken: error = .noRefreshToken
                case .stsFailed: error = failure
                case .leaseWaitTimeout: error = .leaseWaitTimeout
                case .deadlinePassed: error = .deadlinePassed
                case .unexpectedEvent: error = .unexpected
                }
                let refusedTakeover = takenOverFrom != nil && error.refreshTokenDied
                metrics.increment("tokenrelay_refresh_total", ["outcome": refusedTakeover ? "takeover_refused" : error.refreshOutcome])
                if case .stsFailed = reason { recordFailure(error, accountId: accountId) }
                return .failure(error)

            case .none:
                return .failure(.unexpected)
            }
        }
    }

    /// What a takeover found after waiting for the holder whose lease it took over.
    package enum PreviousHolderRotation: Sendable, Equatable {
        /// The refresh token claimed is still the stored one; the lease is still this claim's.
        case unchanged
        /// The previous holder stored its rotation: `token`, of `generation`, is the latest; the
        /// lease is this claim's again.
        case stored(token: String, generation: Int64)
        /// The lease went to another claim (the previous holder's write released it), or the
        /// refresh token is gone: claim again.
        case leaseLost
    }

    /// Waits up to `seconds` (never past the caller's deadline) for the holder whose lease this
    /// claim took over to store the rotation it may hold (behaviour §2.6, "after a database
    /// outage"), re-reading the row every ``pollSeconds`` or at once when its write's
    /// `refresh.released` arrives. A re-read is a claim with this claim's own `owner` (migration
    /// 0025): it renews the lease while it waits and returns the token stored now. Only a
    /// takeover runs this: an ordinary claim issues no extra statement.
    /// - Throws: `RelayError` 503 when the database is unreachable.
    package func awaitPreviousHolder(
        _ request: Request, owner: String, generation: Int64, seconds: Double, previousOwner: String
    ) async throws -> PreviousHolderRotation {
        let accountId = request.account.accountId
        let until = min(waiting.now().addingTimeInterval(seconds), request.context.deadline.addingTimeInterval(-Self.ownWaitMarginSeconds))
        let reread = rereadClaim(request, owner: owner)
        while true {
            let left = until.timeIntervalSince(waiting.now())
            if left > 0 { await waiters.wait(accountId: accountId, seconds: min(pollSeconds, left)) }
            let found: PreviousHolderRotation
            switch try await store.claimRefresh(reread) {
            case .claimed(let token, let stored, _) where stored != generation: found = .stored(token: token, generation: stored)
            case .claimed: found = .unchanged
            case .heldElsewhere, .freshTokenStored, .noRefreshToken: found = .leaseLost
            }
            if found == .unchanged, waiting.now() < until { continue }
            metrics.increment("tokenrelay_refresh_takeover_rereads_total", ["result": found.metricLabel])
            if case .stored(_, let stored) = found {
                logger.warn(
                    "token.takeover_rotation_stored",
                    [
                        "account.id": accountId, "lease.previous_holder": Self.replica(ofOwner: previousOwner), "refresh.generation": String(stored),
                    ])
            }
            return found
        }
    }

    /// A claim by `owner`, which holds the lease or held it last: takes it again (renewed) with the
    /// refresh token stored now (migration 0025), or says who holds it instead. No cache check.
    private func rereadClaim(_ request: Request, owner: String) -> RefreshClaimRequest {
        RefreshClaimRequest(
            accountId: request.account.accountId, environment: request.account.environment, realm: request.realm, scopes: request.scopes,
            checkCache: false, acceptRefreshDue: false, minimumExpiresOn: now(), now: now(), owner: owner, leaseSeconds: leaseSeconds)
    }

    /// Records a failed redemption for the account's health in the background (behaviour §3.8):
    /// the answer does not wait for it, and a write that fails is only logged.
    package func recordFailure(_ error: AcquisitionError, accountId: String) {
        guard let failure = AccountFailure(error) else { return }
        let store = self.store
        let logger = self.logger
        _ = tasks.startIfRoom {
            do { try await store.recordFailure(accountId: accountId, failure) } catch {
                logger.warn("account.failure_record_failed", ["account.id": accountId, "error": String(describing: type(of: error))])
            }
        }
    }

    /// - Parameter target: the granted set `accessToken`'s scopes are the canonical form of.
    private func rotationWrite(
        _ response: TokenResponse, generation: Int64, redeemed: String, accessToken: StoredAccessToken?, target: ScopeSet?, request: Request
    ) -> RotationWrite {
        RotationWrite(
            response, accountId: request.account.accountId, tenantId: request.account.realm, generation: generation, redeemed: redeemed,
            accessToken: accessToken, accessTokenScopes: target,
            // A claims challenge met: other replicas must stop serving the token it rejected.
            notifyAccessTokensReplaced: request.mode == .bypass && ClaimsRequest.bypassesCache(claims: request.claims))
    }

    /// A lease owner unique to one claim: this replica's origin and 72 random bits, so no one
    /// can release a lease they do not hold.
    package static func newLeaseOwner() -> String {
        ReplicaInvalidation.origin + "." + RandomToken.make(bytes: 9)
    }

    /// The replica part of a lease owner (``newLeaseOwner()``): the `replica.id` that replica
    /// logged when it started.
    package static func replica(ofOwner owner: String) -> String {
        String(owner.prefix { $0 != "." })
    }

    /// The context a redemption is sent with: once sent it is not cut short by the caller's
    /// deadline (the STS may rotate the token). Its end follows the deadline and the STS
    /// client's limits (attempts, 30 s per attempt, Retry-After), not the lease, which its
    /// holder keeps alive meanwhile (``keepingLeaseAlive(accountId:owner:_:)``).
    package func redemptionContext(_ caller: RequestContext) -> RequestContext {
        var context = caller
        context.minimumAttemptSeconds = 30
        return context
    }

    /// Runs `call` (a token-endpoint call) while renewing `owner`'s lease every
    /// ``renewalIntervalSeconds``, so the lease can be short: a live holder keeps it however long
    /// the call takes, a dead one loses it within `leaseSeconds`. A call shorter than the interval
    /// issues no statement and starts no task (the first renewal is a timer of the waiting clock,
    /// ``UpstreamClock/schedule(after:_:)``; only when it fires do the renewals get a task). A
    /// renewal that fails (the database is away) is tried again at the next interval; the
    /// holder's answer is kept only through the fenced write, whatever happened to the lease
    /// meanwhile. The renewals are cancelled, not awaited: a renewal still running when the call
    /// ends must not delay the answer, and it cannot extend a lease that a store or release has
    /// cleared (it is fenced on `owner`).
    package func keepingLeaseAlive<Value: Sendable>(accountId: String, owner: String, _ call: () async -> Value) async -> Value {
        let (store, metrics, logger) = (self.store, self.metrics, self.logger)
        let (leaseSeconds, interval, waiting) = (self.leaseSeconds, renewalIntervalSeconds, self.waiting)
        let renewals = LeaseRenewals()
        // Started from a timer, not from this task: the request's trace is handed over, so the
        // renewal statements stay spans of the request's trace (behaviour §8.11) as before.
        let trace = Tracing.current
        let first = waiting.schedule(after: interval) {
            renewals.start(in: trace) {
                while true {
                    if Task.isCancelled { return }
                    let renewed: Bool
                    do {
                        renewed = try await store.renewRefreshLease(accountId: accountId, owner: owner, leaseSeconds: leaseSeconds)
                    } catch {
                        metrics.increment("tokenrelay_refresh_lease_renewals_total", ["result": "failed"])
                        await waiting.sleep(interval)
                        continue
                    }
                    // Cancelled meanwhile: the call ended and its write may have cleared the lease.
                    if Task.isCancelled { return }
                    guard renewed else {
                        metrics.increment("tokenrelay_refresh_lease_renewals_total", ["result": "lost"])
                        logger.warn("token.lease_lost", ["account.id": accountId])
                        return
                    }
                    metrics.increment("tokenrelay_refresh_lease_renewals_total", ["result": "renewed"])
                    await waiting.sleep(interval)
                }
            }
        }
        defer {
            first.cancel()
            renewals.cancel()
        }
        return await call()
    }

    /// Releases every lease this replica still holds: the last step of a shutdown, after the
    /// drain (a redemption still running then is given up; its lease would keep every replica
    /// from the account until it ran out).
    package func releaseHeldLeases() async {
        let leases = held.all
        guard !leases.isEmpty else { return }
        var released = 0
        for lease in leases {
            do {
                try await store.releaseRefreshLease(accountId: lease.accountId, owner: lease.owner)
                held.ended(owner: lease.owner)
                released += 1
            } catch {
                logger.warn("token.lease_release_failed", ["account.id": lease.accountId, "error": String(describing: type(of: error))])
            }
        }
        logger.info("token.leases_released_at_shutdown", ["leases.count": String(released)])
    }

    /// Waits until the account's lease holder releases it (this replica's wake-up or another's
    /// `refresh.released`), the poll interval passes, or the lease runs out, never past `deadline`.
    package func waitForHolder(accountId: String, secondsLeftOnLease: Double, deadline: Date) async {
        let remaining = deadline.timeIntervalSince(waiting.now())
        await waiters.wait(accountId: accountId, seconds: min(pollSeconds, max(0.01, secondsLeftOnLease + 0.01), remaining))
    }

    /// Releases this claim's lease. When the database is away (a restart, a failover), keeps
    /// trying in the background until the lease would have ended: a lease left behind keeps
    /// every replica from refreshing the account for the rest of `leaseSeconds`. Fenced on
    /// `owner`, unique to this claim, so a late release never frees a lease someone else took.
    private func release(accountId: String, owner: String) async {
        do {
            try await store.releaseRefreshLease(accountId: accountId, owner: owner)
            held.ended(owner: owner)
        } catch {
            logger.warn("token.lease_release_failed", ["account.id": accountId, "error": String(describing: type(of: error))])
            releaseInBackground(accountId: accountId, owner: owner)
        }
    }

    /// Tries to release `owner`'s lease every 250 ms until the lease would have ended, or until
    /// the shutdown grace ends (``tasks``).
    private func releaseInBackground(accountId: String, owner: String) {
        let store = self.store
        let waiters = self.waiters
        let logger = self.logger
        let held = self.held
        // Until then the shutdown's last step releases it too (a claim whose answer was lost may hold it).
        held.hold(accountId: accountId, owner: owner)
        let waiting = self.waiting
        let until = waiting.now().addingTimeInterval(leaseSeconds)
        tasks.start {
            while waiting.now() < until {
                await waiting.sleep(0.25)
                if Task.isCancelled { return }
                guard (try? await store.releaseRefreshLease(accountId: accountId, owner: owner)) != nil else { continue }
                held.ended(owner: owner)
                logger.info("token.lease_released_on_retry", ["account.id": accountId])
                waiters.wake(accountId: accountId)
                return
            }
            held.ended(owner: owner)  // it has run out by itself
        }
    }

    /// Stores a rotated refresh token whose fenced write failed after the STS answered (no
    /// refresh token dropped on a transient failure): a few short tries of the same fenced write
    /// without the access token; when the database stays away, the rotation is held in
    /// ``pendingRotations`` (this replica's refreshes redeem it rather than the superseded
    /// stored token) and a task of ``tasks`` keeps trying for `persistWindowSeconds`; at a
    /// shutdown it keeps trying until the grace ends, then logs the rotation lost.
    /// - Returns: true when stored, false when fenced out (a newer token is stored, or the row
    ///   is gone), nil when it is pending in memory.
    package func persistAlone(_ write: RotationWrite) async -> Bool? {
        guard let rotated = write.rotatedRefreshToken else { return true }
        let store = self.store
        @Sendable func tryStoring() async -> Bool? {
            do {
                switch try await store.writeRotation(write) {
                case .stored, .alreadyStored: return true
                case .fencedOut: return false
                }
            } catch {
                return nil  // the database is still away (or the statement failed): try again
            }
        }
        // Held from the first failure, not after the short tries: one try may wait out a connect
        // timeout while the lease runs out, and a refresh of this replica that takes it over must
        // store the rotation first and redeem it, not the token it superseded.
        let pending = pendingRotations
        pending.hold(.init(token: rotated, replacing: write.generation, write: write), accountId: write.accountId)
        for delay in [0.1, 0.4, 1.0] {
            switch await tryStoring() {
            case true?:
                pending.release(accountId: write.accountId, replacing: write.generation)
                logger.warn("token.rotation_stored_on_retry", ["account.id": write.accountId])
                return true
            case false?:
                pending.release(accountId: write.accountId, replacing: write.generation)
                logger.error("token.rotation_superseded", ["account.id": write.accountId])
                return false
            case nil:
                await waiting.sleep(delay)
            }
        }
        logger.warn("token.rotation_pending", ["account.id": write.accountId])
        let (logger, waiting) = (self.logger, self.waiting)
        tasks.start {
            let until = waiting.now().addingTimeInterval(pending.persistWindowSeconds)
            var outcome: Bool?
            while outcome == nil && waiting.now() < until {
                await waiting.sleep(0.25)
                // Cancelled: the shutdown grace is over and the pool closes next.
                if Task.isCancelled { break }
                outcome = await tryStoring()
            }
            pending.release(accountId: write.accountId, replacing: write.generation)
            switch outcome {
            case true?: logger.warn("token.rotation_stored_on_retry", ["account.id": write.accountId])
            // A refresh of this replica redeemed the held token and stored its successor.
            case false?: logger.info("token.rotation_superseded", ["account.id": write.accountId])
            case nil: logger.error("token.rotation_lost", ["account.id": write.accountId])
            }
        }
        return nil
    }
}

extension RefreshExecutor.PreviousHolderRotation {
    /// `tokenrelay_refresh_takeover_rereads_total{result}`.
    package var metricLabel: String {
        switch self {
        case .unchanged: "unchanged"
        case .stored: "rotation_stored"
        case .leaseLost: "lease_lost"
        }
    }
}

/// The renewals of one lease while its token-endpoint call runs (``RefreshExecutor/keepingLeaseAlive(accountId:owner:_:)``):
/// a task started only once the first renewal is due, and cancelled with the call's end, also
/// when that end comes first (then it never starts).
final class LeaseRenewals: Sendable {
    private let state = Mutex<(cancelled: Bool, task: Task<Void, Never>?)>((false, nil))

    /// Starts `renew` in a task, with `trace` as its current span, unless the call has ended.
    func start(in trace: ActiveSpan?, _ renew: @escaping @Sendable () async -> Void) {
        state.withLock { state in
            guard !state.cancelled else { return }
            state.task = Task { await Tracing.$current.withValue(trace) { await renew() } }
        }
    }

    func cancel() {
        state.withLock { state in
            state.cancelled = true
            state.task?.cancel()
        }
    }
}
