import Testing

@testable import IdentityCore

/// The refresh-token redemption's decisions (behaviour §2.6, §10), fed as events without a
/// database or an STS: every event in every state reachable in each mode, the behaviours by name,
/// and one whole path per outcome.
@Suite("Refresh state machine (behaviour §2.6)")
struct RefreshStateMachineTests {
    typealias Machine = RefreshStateMachine
    typealias Mode = RefreshStateMachine.Mode
    typealias Action = RefreshStateMachine.Action
    typealias State = RefreshStateMachine.State

    /// The generation every claim in these tests takes (the generation itself is checked by
    /// ``Behaviours/generationCarriedThrough(generation:)``).
    static let generation: Int64 = 7

    /// The modes that check the cache at claim time.
    static let cacheModes: [Mode] = [.cacheFirst, .proactive]

    /// One event of the machine's API, with its argument.
    enum Event: Sendable, CaseIterable, CustomTestStringConvertible {
        case start
        case claimed
        case heldElsewhere
        case freshTokenStored
        case noRefreshToken
        case cachedReadUsable
        case cachedReadUnusable
        case holderFinished
        case stsAnswered
        case stsFailedDead
        case stsFailedAlive
        case deadMarked
        case stored
        case fencedOut
        case commitFailed
        case deadlinePassed
        case reread
        case leaseLost

        func send(to machine: inout Machine) -> Action {
            switch self {
            case .start: machine.start()
            case .claimed: machine.claimed(generation: RefreshStateMachineTests.generation)
            case .heldElsewhere: machine.heldElsewhere()
            case .freshTokenStored: machine.freshTokenStored()
            case .noRefreshToken: machine.noRefreshToken()
            case .cachedReadUsable: machine.cachedRead(usable: true)
            case .cachedReadUnusable: machine.cachedRead(usable: false)
            case .holderFinished: machine.holderFinished()
            case .stsAnswered: machine.stsAnswered()
            case .stsFailedDead: machine.stsFailed(refreshTokenDead: true)
            case .stsFailedAlive: machine.stsFailed(refreshTokenDead: false)
            case .deadMarked: machine.deadMarked()
            case .stored: machine.stored()
            case .fencedOut: machine.fencedOut()
            case .commitFailed: machine.commitFailed()
            case .deadlinePassed: machine.deadlinePassed()
            case .reread: machine.reread(generation: RefreshStateMachineTests.generation)
            case .leaseLost: machine.leaseLost()
            }
        }

        var testDescription: String {
            switch self {
            case .claimed: "claimed(generation: \(RefreshStateMachineTests.generation))"
            case .cachedReadUsable: "cachedRead(usable: true)"
            case .cachedReadUnusable: "cachedRead(usable: false)"
            case .stsFailedDead: "stsFailed(refreshTokenDead: true)"
            case .stsFailedAlive: "stsFailed(refreshTokenDead: false)"
            case .reread: "reread(generation: \(RefreshStateMachineTests.generation))"
            default: "\(self)()"
            }
        }
    }

    /// A state, and how to reach it through the public API in a mode (nil: it cannot be reached
    /// in that mode).
    enum Reached: Sendable, CaseIterable, CustomTestStringConvertible {
        case initial
        case claimingWithCacheCheck
        case claimingWithoutCacheCheck
        case readingCache
        case waiting
        case redeeming
        case storing
        case markingDead
        case persistingAlone
        case done

        var state: State {
            let generation = RefreshStateMachineTests.generation
            return switch self {
            case .initial: .initial
            case .claimingWithCacheCheck: .claiming(checkCache: true)
            case .claimingWithoutCacheCheck: .claiming(checkCache: false)
            case .readingCache: .readingCache
            case .waiting: .waiting
            case .redeeming: .redeeming(generation: generation)
            case .storing: .storing(generation: generation)
            case .markingDead: .markingDead(generation: generation)
            case .persistingAlone: .persistingAlone(generation: generation)
            case .done: .done
            }
        }

        /// Whether this refresh holds the redemption lease here (taken by the claim, released by
        /// the fenced write or by the executor on `releaseLease: true`).
        var holdsLease: Bool {
            switch self {
            case .redeeming, .storing, .markingDead, .persistingAlone: true
            case .initial, .claimingWithCacheCheck, .claimingWithoutCacheCheck, .readingCache, .waiting, .done: false
            }
        }

        func path(in mode: Mode) -> [Event]? {
            let checksCache = mode != .bypass
            return switch self {
            case .initial: []
            case .claimingWithCacheCheck: checksCache ? [.start] : nil
            case .claimingWithoutCacheCheck: checksCache ? [.start, .freshTokenStored, .cachedReadUnusable] : [.start]
            case .readingCache: checksCache ? [.start, .freshTokenStored] : nil
            case .waiting: [.start, .heldElsewhere]
            case .redeeming: [.start, .claimed]
            case .storing: [.start, .claimed, .stsAnswered]
            case .markingDead: [.start, .claimed, .stsFailedDead]
            case .persistingAlone: [.start, .claimed, .stsAnswered, .commitFailed]
            case .done: [.start, .noRefreshToken]
            }
        }

        var testDescription: String { "\(state)" }
    }

    /// A machine in `mode` driven to `reached` by its path, every step accepted.
    static func machine(_ reached: Reached, mode: Mode, sourceLocation: SourceLocation = #_sourceLocation) throws -> Machine {
        let path = try #require(reached.path(in: mode), "\(reached) is not reachable in \(mode)", sourceLocation: sourceLocation)
        var machine = Machine(mode: mode)
        for event in path {
            let action = event.send(to: &machine)
            #expect(action != .answerProblem(.unexpectedEvent, releaseLease: false), "\(event)", sourceLocation: sourceLocation)
            #expect(action != .answerProblem(.unexpectedEvent, releaseLease: true), "\(event)", sourceLocation: sourceLocation)
        }
        #expect(machine.state == reached.state, sourceLocation: sourceLocation)
        return machine
    }

    /// Feeds `steps` to a fresh machine in `mode`, checking each action; returns the machine.
    @discardableResult
    static func run(_ mode: Mode, _ steps: [(Event, Action)], sourceLocation: SourceLocation = #_sourceLocation) -> Machine {
        var machine = Machine(mode: mode)
        for (index, (event, expected)) in steps.enumerated() {
            let action = event.send(to: &machine)
            #expect(action == expected, "step \(index + 1): \(event.testDescription)", sourceLocation: sourceLocation)
        }
        return machine
    }
}

// MARK: - Every event in every state

extension RefreshStateMachineTests {
    /// One accepted transition. Every (state, event, mode) without a row is unexpected.
    struct Row: Sendable {
        let state: Reached
        let event: Event
        let modes: [Mode]
        let action: Action
        let next: State
    }

    /// The transitions the machine accepts, written independently of its code.
    static let rows: [Row] = {
        let all = Mode.allCases
        let cache = cacheModes
        let bypass: [Mode] = [.bypass]
        let g = generation
        return [
            Row(state: .initial, event: .start, modes: cache, action: .claim(checkCache: true), next: .claiming(checkCache: true)),
            Row(state: .initial, event: .start, modes: bypass, action: .claim(checkCache: false), next: .claiming(checkCache: false)),
            Row(state: .initial, event: .deadlinePassed, modes: all, action: .answerProblem(.deadlinePassed, releaseLease: false), next: .done),

            Row(state: .claimingWithCacheCheck, event: .claimed, modes: cache, action: .redeem(generation: g), next: .redeeming(generation: g)),
            Row(state: .claimingWithCacheCheck, event: .heldElsewhere, modes: cache, action: .wait, next: .waiting),
            Row(state: .claimingWithCacheCheck, event: .freshTokenStored, modes: cache, action: .readCache, next: .readingCache),
            Row(
                state: .claimingWithCacheCheck, event: .noRefreshToken, modes: cache, action: .answerProblem(.noRefreshToken, releaseLease: false),
                next: .done),
            Row(
                state: .claimingWithCacheCheck, event: .deadlinePassed, modes: cache, action: .answerProblem(.deadlinePassed, releaseLease: false),
                next: .done),

            Row(state: .claimingWithoutCacheCheck, event: .claimed, modes: all, action: .redeem(generation: g), next: .redeeming(generation: g)),
            Row(state: .claimingWithoutCacheCheck, event: .heldElsewhere, modes: all, action: .wait, next: .waiting),
            Row(
                state: .claimingWithoutCacheCheck, event: .noRefreshToken, modes: all, action: .answerProblem(.noRefreshToken, releaseLease: false),
                next: .done),
            Row(
                state: .claimingWithoutCacheCheck, event: .deadlinePassed, modes: all, action: .answerProblem(.deadlinePassed, releaseLease: false),
                next: .done),

            Row(state: .readingCache, event: .cachedReadUsable, modes: cache, action: .serve(.cache, releaseLease: false), next: .done),
            Row(state: .readingCache, event: .cachedReadUnusable, modes: cache, action: .claim(checkCache: false), next: .claiming(checkCache: false)),
            Row(state: .readingCache, event: .deadlinePassed, modes: cache, action: .answerProblem(.deadlinePassed, releaseLease: false), next: .done),

            Row(state: .waiting, event: .holderFinished, modes: cache, action: .claim(checkCache: true), next: .claiming(checkCache: true)),
            Row(state: .waiting, event: .holderFinished, modes: bypass, action: .claim(checkCache: false), next: .claiming(checkCache: false)),
            Row(state: .waiting, event: .deadlinePassed, modes: all, action: .answerProblem(.leaseWaitTimeout, releaseLease: false), next: .done),

            Row(state: .redeeming, event: .stsAnswered, modes: all, action: .storeRotation(generation: g), next: .storing(generation: g)),
            Row(state: .redeeming, event: .stsFailedDead, modes: all, action: .markDead(generation: g), next: .markingDead(generation: g)),
            Row(state: .redeeming, event: .stsFailedAlive, modes: all, action: .answerProblem(.stsFailed, releaseLease: true), next: .done),
            Row(state: .redeeming, event: .deadlinePassed, modes: all, action: .none, next: .redeeming(generation: g)),
            Row(state: .redeeming, event: .reread, modes: all, action: .redeem(generation: g), next: .redeeming(generation: g)),
            Row(state: .redeeming, event: .leaseLost, modes: cache, action: .claim(checkCache: true), next: .claiming(checkCache: true)),
            Row(state: .redeeming, event: .leaseLost, modes: bypass, action: .claim(checkCache: false), next: .claiming(checkCache: false)),

            Row(state: .storing, event: .stored, modes: all, action: .serve(.refresh, releaseLease: false), next: .done),
            Row(state: .storing, event: .fencedOut, modes: all, action: .serve(.refresh, releaseLease: true), next: .done),
            Row(state: .storing, event: .commitFailed, modes: all, action: .persistAlone(generation: g), next: .persistingAlone(generation: g)),
            Row(state: .storing, event: .deadlinePassed, modes: all, action: .none, next: .storing(generation: g)),

            Row(state: .markingDead, event: .deadMarked, modes: all, action: .answerProblem(.stsFailed, releaseLease: true), next: .done),
            Row(state: .markingDead, event: .deadlinePassed, modes: all, action: .none, next: .markingDead(generation: g)),

            Row(state: .persistingAlone, event: .stored, modes: all, action: .serve(.refresh, releaseLease: false), next: .done),
            Row(state: .persistingAlone, event: .fencedOut, modes: all, action: .serve(.refresh, releaseLease: true), next: .done),
            Row(state: .persistingAlone, event: .commitFailed, modes: all, action: .serve(.refresh, releaseLease: false), next: .done),
            Row(state: .persistingAlone, event: .deadlinePassed, modes: all, action: .none, next: .persistingAlone(generation: g)),
            // `.done` has no row: every event there is `.none` (checked below).
        ]
    }()

    /// One cell of the matrix: an event fed to a machine in a state, in a mode.
    struct Cell: Sendable, CustomTestStringConvertible {
        let mode: Mode
        let state: Reached
        let event: Event

        var testDescription: String { "\(mode) · \(state.testDescription) · \(event.testDescription)" }

        /// The row's action and next state, or the unexpected-event answer.
        var expected: (action: Action, next: State) {
            if let row = RefreshStateMachineTests.rows.first(where: { $0.state == state && $0.event == event && $0.modes.contains(mode) }) {
                return (row.action, row.next)
            }
            if state == .done { return (.none, .done) }
            return (.answerProblem(.unexpectedEvent, releaseLease: state.holdsLease), .done)
        }
    }

    /// Every event in every state reachable in every mode.
    static let cells: [Cell] = Mode.allCases.flatMap { mode in
        Reached.allCases.filter { $0.path(in: mode) != nil }.flatMap { state in Event.allCases.map { Cell(mode: mode, state: state, event: $0) } }
    }

    @Suite("Every event in every state")
    struct Matrix {
        @Test("the action and the next state", arguments: RefreshStateMachineTests.cells)
        func cell(_ cell: Cell) throws {
            var machine = try RefreshStateMachineTests.machine(cell.state, mode: cell.mode)
            let action = cell.event.send(to: &machine)
            #expect(action == cell.expected.action)
            #expect(machine.state == cell.expected.next)
            #expect(machine.mode == cell.mode)
        }

        @Test("the matrix has every cell: 10 states in cacheFirst and proactive, 8 in bypass, 18 events each")
        func complete() {
            #expect(Event.allCases.count == 18)
            #expect(RefreshStateMachineTests.cells.count == (10 + 10 + 8) * 18)
        }

        @Test("every row is reachable and no two rows claim the same cell")
        func rowsAreSound() {
            for row in RefreshStateMachineTests.rows {
                for mode in row.modes {
                    #expect(row.state.path(in: mode) != nil, "\(row.state) in \(mode)")
                    let matching = RefreshStateMachineTests.rows.filter { $0.state == row.state && $0.event == row.event && $0.modes.contains(mode) }
                    #expect(matching.count == 1, "\(row.state) · \(row.event) in \(mode)")
                }
            }
        }

        /// Explores every event from every state reached, so the states above are all there is:
        /// a state the helper misses, or one reachable in a mode it should not be, fails here.
        @Test("the states reachable in each mode are exactly the ones the matrix covers", arguments: Mode.allCases)
        func reachableStates(mode: Mode) {
            var seen: [State] = [.initial]
            var frontier: [Machine] = [Machine(mode: mode)]
            while let machine = frontier.popLast() {
                for event in Event.allCases {
                    var next = machine
                    _ = event.send(to: &next)
                    if !seen.contains(next.state) {
                        seen.append(next.state)
                        frontier.append(next)
                    }
                }
            }
            let expected = Reached.allCases.filter { $0.path(in: mode) != nil }.map(\.state)
            #expect(seen.count == expected.count)
            for state in expected { #expect(seen.contains(state), "\(state)") }
            for state in seen { #expect(expected.contains(state), "\(state)") }
        }
    }
}

// MARK: - The behaviours by name

extension RefreshStateMachineTests {
    @Suite("Behaviours")
    struct Behaviours {
        @Test("bypass never checks the cache: start and a finished holder both claim without it")
        func bypassNeverChecksTheCache() throws {
            var machine = Machine(mode: .bypass)
            #expect(machine.start() == .claim(checkCache: false))
            #expect(machine.state == .claiming(checkCache: false))

            var waiting = try RefreshStateMachineTests.machine(.waiting, mode: .bypass)
            #expect(waiting.holderFinished() == .claim(checkCache: false))
            #expect(waiting.state == .claiming(checkCache: false))
        }

        @Test("cacheFirst and proactive claim with the cache check, at start and after waiting", arguments: RefreshStateMachineTests.cacheModes)
        func cacheModesCheckTheCache(mode: Mode) throws {
            var machine = Machine(mode: mode)
            #expect(machine.start() == .claim(checkCache: true))
            #expect(machine.state == .claiming(checkCache: true))

            var waiting = try RefreshStateMachineTests.machine(.waiting, mode: mode)
            #expect(waiting.holderFinished() == .claim(checkCache: true))
            #expect(waiting.state == .claiming(checkCache: true))
        }

        @Test("a claim without the cache check cannot report a fresh token", arguments: Mode.allCases)
        func noFreshTokenWithoutCacheCheck(mode: Mode) throws {
            var machine = try RefreshStateMachineTests.machine(.claimingWithoutCacheCheck, mode: mode)
            #expect(machine.freshTokenStored() == .answerProblem(.unexpectedEvent, releaseLease: false))
            #expect(machine.state == .done)
        }

        @Test(
            "a fresh token seen at claim but not usable on read is claimed past without the cache check (no loop)",
            arguments: RefreshStateMachineTests.cacheModes)
        func unusableCacheClaimsPast(mode: Mode) {
            let machine = RefreshStateMachineTests.run(
                mode,
                [
                    (.start, .claim(checkCache: true)),
                    (.freshTokenStored, .readCache),
                    (.cachedReadUnusable, .claim(checkCache: false)),
                    (.freshTokenStored, .answerProblem(.unexpectedEvent, releaseLease: false)),
                ])
            #expect(machine.state == .done)

            let redeems = RefreshStateMachineTests.run(
                mode,
                [
                    (.start, .claim(checkCache: true)),
                    (.freshTokenStored, .readCache),
                    (.cachedReadUnusable, .claim(checkCache: false)),
                    (.claimed, .redeem(generation: RefreshStateMachineTests.generation)),
                ])
            #expect(redeems.state == .redeeming(generation: RefreshStateMachineTests.generation))
        }

        @Test("a deadline while waiting for the lease holder is leaseWaitTimeout", arguments: Mode.allCases)
        func deadlineWhileWaiting(mode: Mode) throws {
            var machine = try RefreshStateMachineTests.machine(.waiting, mode: mode)
            #expect(machine.deadlinePassed() == .answerProblem(.leaseWaitTimeout, releaseLease: false))
            #expect(machine.state == .done)
        }

        @Test(
            "a deadline before the STS call is deadlinePassed",
            arguments: Mode.allCases, [Reached.initial, .claimingWithCacheCheck, .claimingWithoutCacheCheck, .readingCache])
        func deadlineBeforeTheSTS(mode: Mode, state: Reached) throws {
            guard state.path(in: mode) != nil else { return }  // cache-check states are not reachable in bypass
            var machine = try RefreshStateMachineTests.machine(state, mode: mode)
            #expect(machine.deadlinePassed() == .answerProblem(.deadlinePassed, releaseLease: false))
            #expect(machine.state == .done)
        }

        @Test(
            "a deadline once the STS is asked changes nothing: the redemption goes on",
            arguments: Mode.allCases, [Reached.redeeming, .storing, .markingDead, .persistingAlone])
        func deadlineAfterTheSTS(mode: Mode, state: Reached) throws {
            var machine = try RefreshStateMachineTests.machine(state, mode: mode)
            #expect(machine.deadlinePassed() == .none)
            #expect(machine.state == state.state)
            #expect(machine.deadlinePassed() == .none)
            #expect(machine.state == state.state)
        }

        @Test("a dead refresh token is marked dead, then the STS failure is answered releasing the lease", arguments: Mode.allCases)
        func deadRefreshToken(mode: Mode) throws {
            var machine = try RefreshStateMachineTests.machine(.redeeming, mode: mode)
            #expect(machine.stsFailed(refreshTokenDead: true) == .markDead(generation: RefreshStateMachineTests.generation))
            #expect(machine.state == .markingDead(generation: RefreshStateMachineTests.generation))
            #expect(machine.deadMarked() == .answerProblem(.stsFailed, releaseLease: true))
            #expect(machine.state == .done)
        }

        @Test("an STS failure that leaves the refresh token alive is answered at once, releasing the lease", arguments: Mode.allCases)
        func liveRefreshTokenFailure(mode: Mode) throws {
            var machine = try RefreshStateMachineTests.machine(.redeeming, mode: mode)
            #expect(machine.stsFailed(refreshTokenDead: false) == .answerProblem(.stsFailed, releaseLease: true))
            #expect(machine.state == .done)
        }

        @Test("no refresh token stored is answered without a lease to release", arguments: Mode.allCases)
        func noRefreshToken(mode: Mode) throws {
            var machine = Machine(mode: mode)
            _ = machine.start()
            #expect(machine.noRefreshToken() == .answerProblem(.noRefreshToken, releaseLease: false))
            #expect(machine.state == .done)
        }

        @Test("fenced out, the issued token is served and the lease released (the write did not)", arguments: [Reached.storing, .persistingAlone])
        func fencedOut(state: Reached) throws {
            var machine = try RefreshStateMachineTests.machine(state, mode: .cacheFirst)
            #expect(machine.fencedOut() == .serve(.refresh, releaseLease: true))
            #expect(machine.state == .done)
        }

        @Test("a stored rotation, or a refresh token persisted alone, is served; the write released the lease", arguments: [Reached.storing, .persistingAlone])
        func stored(state: Reached) throws {
            var machine = try RefreshStateMachineTests.machine(state, mode: .cacheFirst)
            #expect(machine.stored() == .serve(.refresh, releaseLease: false))
            #expect(machine.state == .done)
        }

        @Test("a failed commit persists the refresh token alone; a second failure serves and keeps the lease")
        func commitFailedTwice() throws {
            var machine = try RefreshStateMachineTests.machine(.storing, mode: .proactive)
            #expect(machine.commitFailed() == .persistAlone(generation: RefreshStateMachineTests.generation))
            #expect(machine.state == .persistingAlone(generation: RefreshStateMachineTests.generation))
            #expect(machine.commitFailed() == .serve(.refresh, releaseLease: false))
            #expect(machine.state == .done)
        }

        @Test("the claimed generation is the one redeemed, stored, marked dead and persisted", arguments: [0, 1, 41, Int64.max] as [Int64])
        func generationCarriedThrough(generation: Int64) {
            var storing = Machine(mode: .bypass)
            _ = storing.start()
            #expect(storing.claimed(generation: generation) == .redeem(generation: generation))
            #expect(storing.stsAnswered() == .storeRotation(generation: generation))
            #expect(storing.commitFailed() == .persistAlone(generation: generation))
            #expect(storing.state == .persistingAlone(generation: generation))

            var dead = Machine(mode: .cacheFirst)
            _ = dead.start()
            #expect(dead.claimed(generation: generation) == .redeem(generation: generation))
            #expect(dead.stsFailed(refreshTokenDead: true) == .markDead(generation: generation))
            #expect(dead.state == .markingDead(generation: generation))
        }

        @Test(
            "a takeover's re-read redeems the generation the previous holder stored, then stores and marks dead on that one",
            arguments: Mode.allCases)
        func rereadCarriesTheNewGeneration(mode: Mode) {
            let (old, new) = (RefreshStateMachineTests.generation, RefreshStateMachineTests.generation + 1)
            var stored = Machine(mode: mode)
            _ = stored.start()
            #expect(stored.claimed(generation: old) == .redeem(generation: old))
            #expect(stored.reread(generation: new) == .redeem(generation: new))
            #expect(stored.stsAnswered() == .storeRotation(generation: new))
            var dead = Machine(mode: mode)
            _ = dead.start()
            _ = dead.claimed(generation: old)
            _ = dead.reread(generation: new)
            #expect(dead.stsFailed(refreshTokenDead: true) == .markDead(generation: new))
        }

        @Test("a takeover that lost its lease while re-reading claims again", arguments: Mode.allCases)
        func leaseLostClaimsAgain(mode: Mode) {
            let machine = RefreshStateMachineTests.run(
                mode,
                [
                    (.start, .claim(checkCache: mode != .bypass)),
                    (.claimed, .redeem(generation: RefreshStateMachineTests.generation)),
                    (.leaseLost, .claim(checkCache: mode != .bypass)),
                    (.heldElsewhere, .wait),
                ])
            #expect(machine.state == .waiting)
        }

        /// An event each state cannot take: `start()` everywhere but `initial`, where `stored()`
        /// cannot happen.
        static func impossibleEvent(in state: Reached) -> Event { state == .initial ? .stored : .start }

        @Test(
            "an unexpected event ends the refresh, releasing the lease exactly when the state held it",
            arguments: Mode.allCases, Reached.allCases.filter { $0 != .done })
        func unexpectedEvent(mode: Mode, state: Reached) throws {
            guard state.path(in: mode) != nil else { return }  // cache-check states are not reachable in bypass
            let holdsLease = [Reached.redeeming, .storing, .markingDead, .persistingAlone].contains(state)
            var machine = try RefreshStateMachineTests.machine(state, mode: mode)
            #expect(Self.impossibleEvent(in: state).send(to: &machine) == .answerProblem(.unexpectedEvent, releaseLease: holdsLease))
            #expect(machine.state == .done)
            // Ended: the executor's next report changes nothing, even one that would have fit.
            #expect(Event.start.send(to: &machine) == .none)
            #expect(machine.state == .done)
        }

        /// Every way a refresh ends.
        static let endings: [[Event]] = [
            [.start, .noRefreshToken],
            [.start, .freshTokenStored, .cachedReadUsable],
            [.start, .claimed, .stsAnswered, .stored],
            [.start, .claimed, .stsAnswered, .fencedOut],
            [.start, .claimed, .stsAnswered, .commitFailed, .stored],
            [.start, .claimed, .stsAnswered, .commitFailed, .fencedOut],
            [.start, .claimed, .stsAnswered, .commitFailed, .commitFailed],
            [.start, .claimed, .stsFailedAlive],
            [.start, .claimed, .stsFailedDead, .deadMarked],
            [.start, .heldElsewhere, .deadlinePassed],
            [.deadlinePassed],
            [.start, .deadlinePassed],
            [.start, .freshTokenStored, .deadlinePassed],
            [.start, .claimed, .start],
            [.stored],
        ]

        @Test("once done, every event is none, however the refresh ended", arguments: Behaviours.endings, Event.allCases)
        func doneIgnoresEverything(ending: [Event], event: Event) {
            var machine = Machine(mode: .cacheFirst)
            for step in ending { _ = step.send(to: &machine) }
            #expect(machine.state == .done)
            #expect(event.send(to: &machine) == .none)
            #expect(machine.state == .done)
        }
    }
}

// MARK: - Whole paths, one per outcome

extension RefreshStateMachineTests {
    @Suite("Whole paths")
    struct Paths {
        static let g = RefreshStateMachineTests.generation

        @Test("the rotation is redeemed and stored", arguments: Mode.allCases)
        func rotationStored(mode: Mode) {
            let machine = RefreshStateMachineTests.run(
                mode,
                [
                    (.start, .claim(checkCache: mode != .bypass)),
                    (.claimed, .redeem(generation: Self.g)),
                    (.stsAnswered, .storeRotation(generation: Self.g)),
                    (.stored, .serve(.refresh, releaseLease: false)),
                ])
            #expect(machine.state == .done)
        }

        @Test(
            "no usable token; another redemption holds the lease; it finishes; its token is served from the cache",
            arguments: RefreshStateMachineTests.cacheModes)
        func waitThenServeCache(mode: Mode) {
            let machine = RefreshStateMachineTests.run(
                mode,
                [
                    (.start, .claim(checkCache: true)),
                    (.heldElsewhere, .wait),
                    (.holderFinished, .claim(checkCache: true)),
                    (.freshTokenStored, .readCache),
                    (.cachedReadUsable, .serve(.cache, releaseLease: false)),
                ])
            #expect(machine.state == .done)
        }

        @Test("bypass waits for the holder, then redeems itself (the holder's token does not count)")
        func bypassWaitsThenRedeems() {
            let machine = RefreshStateMachineTests.run(
                .bypass,
                [
                    (.start, .claim(checkCache: false)),
                    (.heldElsewhere, .wait),
                    (.holderFinished, .claim(checkCache: false)),
                    (.heldElsewhere, .wait),
                    (.holderFinished, .claim(checkCache: false)),
                    (.claimed, .redeem(generation: Self.g)),
                    (.stsAnswered, .storeRotation(generation: Self.g)),
                    (.stored, .serve(.refresh, releaseLease: false)),
                ])
            #expect(machine.state == .done)
        }

        @Test("the STS says the refresh token is dead: it is marked dead and the failure answered", arguments: Mode.allCases)
        func deadToken(mode: Mode) {
            let machine = RefreshStateMachineTests.run(
                mode,
                [
                    (.start, .claim(checkCache: mode != .bypass)),
                    (.claimed, .redeem(generation: Self.g)),
                    (.stsFailedDead, .markDead(generation: Self.g)),
                    (.deadMarked, .answerProblem(.stsFailed, releaseLease: true)),
                ])
            #expect(machine.state == .done)
        }

        @Test("the STS fails with the refresh token alive: answered at once")
        func stsFailed() {
            let machine = RefreshStateMachineTests.run(
                .cacheFirst,
                [
                    (.start, .claim(checkCache: true)),
                    (.claimed, .redeem(generation: Self.g)),
                    (.stsFailedAlive, .answerProblem(.stsFailed, releaseLease: true)),
                ])
            #expect(machine.state == .done)
        }

        @Test("a newer refresh token was stored meanwhile: fenced out, the issued token is still served", arguments: Mode.allCases)
        func fencedOut(mode: Mode) {
            let machine = RefreshStateMachineTests.run(
                mode,
                [
                    (.start, .claim(checkCache: mode != .bypass)),
                    (.claimed, .redeem(generation: Self.g)),
                    (.stsAnswered, .storeRotation(generation: Self.g)),
                    (.fencedOut, .serve(.refresh, releaseLease: true)),
                ])
            #expect(machine.state == .done)
        }

        @Test("the commit fails twice: the refresh token alone is tried, then the token is served with the rotation pending", arguments: Mode.allCases)
        func commitFailedTwice(mode: Mode) {
            let machine = RefreshStateMachineTests.run(
                mode,
                [
                    (.start, .claim(checkCache: mode != .bypass)),
                    (.claimed, .redeem(generation: Self.g)),
                    (.stsAnswered, .storeRotation(generation: Self.g)),
                    (.commitFailed, .persistAlone(generation: Self.g)),
                    (.commitFailed, .serve(.refresh, releaseLease: false)),
                ])
            #expect(machine.state == .done)
        }

        @Test("the commit fails once: the refresh token alone is stored and the token served")
        func commitFailedThenPersisted() {
            let machine = RefreshStateMachineTests.run(
                .cacheFirst,
                [
                    (.start, .claim(checkCache: true)),
                    (.claimed, .redeem(generation: Self.g)),
                    (.stsAnswered, .storeRotation(generation: Self.g)),
                    (.commitFailed, .persistAlone(generation: Self.g)),
                    (.stored, .serve(.refresh, releaseLease: false)),
                ])
            #expect(machine.state == .done)
        }

        @Test("the deadline passes during the STS call and the store: the rotation is still stored")
        func deadlineDuringRedemption() {
            let machine = RefreshStateMachineTests.run(
                .cacheFirst,
                [
                    (.start, .claim(checkCache: true)),
                    (.claimed, .redeem(generation: Self.g)),
                    (.deadlinePassed, .none),
                    (.stsAnswered, .storeRotation(generation: Self.g)),
                    (.deadlinePassed, .none),
                    (.stored, .serve(.refresh, releaseLease: false)),
                ])
            #expect(machine.state == .done)
        }

        @Test("the lease holder outlasts the deadline: leaseWaitTimeout", arguments: Mode.allCases)
        func leaseWaitTimeout(mode: Mode) {
            let machine = RefreshStateMachineTests.run(
                mode,
                [
                    (.start, .claim(checkCache: mode != .bypass)),
                    (.heldElsewhere, .wait),
                    (.holderFinished, .claim(checkCache: mode != .bypass)),
                    (.heldElsewhere, .wait),
                    (.deadlinePassed, .answerProblem(.leaseWaitTimeout, releaseLease: false)),
                ])
            #expect(machine.state == .done)
        }

        @Test("no refresh token for the account: the user must sign in", arguments: Mode.allCases)
        func noRefreshToken(mode: Mode) {
            let machine = RefreshStateMachineTests.run(
                mode,
                [
                    (.start, .claim(checkCache: mode != .bypass)),
                    (.noRefreshToken, .answerProblem(.noRefreshToken, releaseLease: false)),
                ])
            #expect(machine.state == .done)
        }
    }
}
