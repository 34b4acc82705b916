/// The decisions of one refresh-token redemption (behaviour §2.6, §10; ADR 0012), as a pure
/// state machine in the shape of postgres-nio's `ConnectionStateMachine`: the executor reports
/// what happened (an event) and performs the ``Action`` it gets back. Nothing here does I/O, so
/// every event can be fed in every state by a unit test.
///
/// One refresh runs:
/// 1. `claim`: one short statement that takes this account's redemption lease (or learns that
///    another replica holds it, or that a usable access token is already stored);
/// 2. `redeem`: the STS call, with nothing of PostgreSQL held;
/// 3. `storeRotation`: one short statement that stores the rotation only if the refresh token row
///    is still at the generation that was redeemed (a fenced write), releasing the lease.
///
/// The payloads (the refresh token, the STS answer, the failure) stay with the executor: the
/// machine decides only what to do next.
public struct RefreshStateMachine: Sendable {
    /// How the refresh treats a token stored meanwhile by another redemption.
    public enum Mode: String, Sendable, CaseIterable {
        /// No usable token was found: one stored meanwhile is served.
        case cacheFirst = "cache"
        /// `refresh_on` passed: only a token not yet due for refresh counts as done.
        case proactive
        /// `force_refresh` or claims: the STS is asked whatever is stored.
        case bypass
    }

    /// Where a served token came from.
    public enum Source: Sendable, Equatable {
        /// Stored meanwhile by another redemption (this replica's or another's).
        case cache
        /// Redeemed by this refresh.
        case refresh
    }

    /// Why a refresh ends without a token.
    public enum FailureReason: Sendable, Equatable {
        /// No refresh token is stored for the account: the user must sign in.
        case noRefreshToken
        /// The STS answered an error (the executor holds its classification).
        case stsFailed
        /// Another redemption held the lease past the refresh's deadline.
        case leaseWaitTimeout
        /// The deadline passed before the STS was asked.
        case deadlinePassed
        /// An event that cannot happen in this state (a bug in the executor).
        case unexpectedEvent
    }

    /// What the executor does next.
    public enum Action: Sendable, Equatable {
        /// Take the lease; with `checkCache`, only if no usable access token is stored.
        case claim(checkCache: Bool)
        /// Read the stored access tokens (a usable one was seen at claim time).
        case readCache
        /// Wait for the lease holder to finish (a notification, or the poll interval).
        case wait
        /// Redeem the refresh token of this generation at the STS; nothing of PostgreSQL is held.
        case redeem(generation: Int64)
        /// Store the STS answer, fenced on `generation`, releasing the lease.
        case storeRotation(generation: Int64)
        /// The STS said the refresh token is dead: delete it if still at `generation`.
        case markDead(generation: Int64)
        /// The fenced write failed: store the rotated refresh token alone (its own short tries,
        /// then this replica's pending rotations) so it is never lost.
        case persistAlone(generation: Int64)
        /// Answer with the token; `releaseLease` when the lease is still this refresh's.
        case serve(Source, releaseLease: Bool)
        /// Answer without a token; `releaseLease` when the lease is still this refresh's.
        case answerProblem(FailureReason, releaseLease: Bool)
        /// Nothing to do: the event does not change what is under way (a deadline passing while
        /// the STS call runs: the redemption goes on so its rotation is stored).
        case none
    }

    /// Where the refresh stands.
    public enum State: Sendable, Equatable {
        case initial
        case claiming(checkCache: Bool)
        case readingCache
        case waiting
        case redeeming(generation: Int64)
        case storing(generation: Int64)
        case markingDead(generation: Int64)
        case persistingAlone(generation: Int64)
        case done
    }

    public let mode: Mode
    public private(set) var state: State = .initial

    public init(mode: Mode) {
        self.mode = mode
    }

    /// The first action: claim, checking the stored cache unless the caller bypasses it.
    public mutating func start() -> Action {
        guard state == .initial else { return unexpected() }
        return claim(checkCache: mode != .bypass)
    }

    /// The claim took the lease on the refresh token of `generation`.
    public mutating func claimed(generation: Int64) -> Action {
        guard case .claiming = state else { return unexpected() }
        state = .redeeming(generation: generation)
        return .redeem(generation: generation)
    }

    /// The claim found the lease held by another redemption (this replica's or another's).
    public mutating func heldElsewhere() -> Action {
        guard case .claiming = state else { return unexpected() }
        state = .waiting
        return .wait
    }

    /// The claim found a usable access token stored (only when it checked the cache).
    public mutating func freshTokenStored() -> Action {
        guard case .claiming(checkCache: true) = state else { return unexpected() }
        state = .readingCache
        return .readCache
    }

    /// The claim found no refresh token for the account.
    public mutating func noRefreshToken() -> Action {
        guard case .claiming = state else { return unexpected() }
        state = .done
        return .answerProblem(.noRefreshToken, releaseLease: false)
    }

    /// The cache was read: `usable` when a token covering the request was found. A token seen
    /// at claim time but not readable now (expired meanwhile, key gone) is claimed past.
    public mutating func cachedRead(usable: Bool) -> Action {
        guard state == .readingCache else { return unexpected() }
        if usable {
            state = .done
            return .serve(.cache, releaseLease: false)
        }
        return claim(checkCache: false)
    }

    /// The lease holder finished (notified) or the poll interval passed: claim again.
    public mutating func holderFinished() -> Action {
        guard state == .waiting else { return unexpected() }
        return claim(checkCache: mode != .bypass)
    }

    /// A takeover re-read the row before (or after a refusal of) its redemption and found a newer
    /// refresh token, of `generation`, stored by the previous holder meanwhile; the lease is still
    /// this refresh's: redeem that one (behaviour §2.6, "after a database outage").
    public mutating func reread(generation: Int64) -> Action {
        guard case .redeeming = state else { return unexpected() }
        state = .redeeming(generation: generation)
        return .redeem(generation: generation)
    }

    /// A takeover's re-read found the lease no longer this refresh's (the previous holder's
    /// stored rotation released it and another claim took it) or the row gone: claim again.
    public mutating func leaseLost() -> Action {
        guard case .redeeming = state else { return unexpected() }
        return claim(checkCache: mode != .bypass)
    }

    /// The STS answered with tokens.
    public mutating func stsAnswered() -> Action {
        guard case .redeeming(let generation) = state else { return unexpected() }
        state = .storing(generation: generation)
        return .storeRotation(generation: generation)
    }

    /// The STS call failed; `refreshTokenDead` when the STS said the refresh token itself is
    /// expired, revoked or idle (behaviour §2.2).
    public mutating func stsFailed(refreshTokenDead: Bool) -> Action {
        guard case .redeeming(let generation) = state else { return unexpected() }
        if refreshTokenDead {
            state = .markingDead(generation: generation)
            return .markDead(generation: generation)
        }
        state = .done
        return .answerProblem(.stsFailed, releaseLease: true)
    }

    /// The dead refresh token was deleted (or a newer one was stored meanwhile).
    public mutating func deadMarked() -> Action {
        guard case .markingDead = state else { return unexpected() }
        state = .done
        return .answerProblem(.stsFailed, releaseLease: true)
    }

    /// The rotation (or, after ``commitFailed()``, the rotated refresh token alone) was stored.
    public mutating func stored() -> Action {
        switch state {
        case .storing, .persistingAlone:
            state = .done
            return .serve(.refresh, releaseLease: false)
        default:
            return unexpected()
        }
    }

    /// The fenced write found the row at another generation (a sign-in or another redemption
    /// stored a newer refresh token): nothing of this answer is stored; the access token the STS
    /// issued is still valid and is served.
    public mutating func fencedOut() -> Action {
        switch state {
        case .storing, .persistingAlone:
            state = .done
            return .serve(.refresh, releaseLease: true)
        default:
            return unexpected()
        }
    }

    /// The write failed (the database went away or the statement failed). The first failure
    /// stores the rotated refresh token alone; a second serves the token while this replica
    /// keeps the rotation pending (the executor holds it).
    public mutating func commitFailed() -> Action {
        switch state {
        case .storing(let generation):
            state = .persistingAlone(generation: generation)
            return .persistAlone(generation: generation)
        case .persistingAlone:
            state = .done
            return .serve(.refresh, releaseLease: false)
        default:
            return unexpected()
        }
    }

    /// The refresh's deadline passed. Before the STS is asked the refresh gives up; once the STS
    /// call is sent it goes on (the STS may already have rotated the refresh token).
    public mutating func deadlinePassed() -> Action {
        switch state {
        case .waiting:
            state = .done
            return .answerProblem(.leaseWaitTimeout, releaseLease: false)
        case .initial, .claiming, .readingCache:
            state = .done
            return .answerProblem(.deadlinePassed, releaseLease: false)
        case .redeeming, .storing, .markingDead, .persistingAlone, .done:
            return .none
        }
    }

    private mutating func claim(checkCache: Bool) -> Action {
        state = .claiming(checkCache: checkCache)
        return .claim(checkCache: checkCache)
    }

    /// An event that cannot happen here: end the refresh (releasing a lease it may hold).
    private mutating func unexpected() -> Action {
        let holdsLease: Bool
        switch state {
        case .redeeming, .storing, .markingDead, .persistingAlone: holdsLease = true
        default: holdsLease = false
        }
        if state == .done { return .none }
        state = .done
        return .answerProblem(.unexpectedEvent, releaseLease: holdsLease)
    }
}
