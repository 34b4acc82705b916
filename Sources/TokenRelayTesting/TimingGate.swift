import Testing

/// Keeps the tests that assert wall-clock bounds (a deadline answered within 1.6 s, a replica
/// refusing within 2 s) from running while the tests that burn both cores in bursts do (two
/// PostgreSQL servers and a base backup, 20,000 accounts sealed and inserted, the Graph SDK's
/// Python start-up). Either group runs any number of its tests at once; the two groups take
/// turns, and a group with tests waiting gets the next turn, so neither starves. Everything
/// else runs alongside both, as before. (Under the whole suite on two cores the bounds failed
/// only while such bursts ran; on their own they pass with room to spare.)
public actor TimingGate {
    public enum Group: Sendable { case measuring, heavy }

    public static let shared = TimingGate()

    private var running: (group: Group, count: Int)?
    private var waiting: [(group: Group, resume: CheckedContinuation<Void, Never>)] = []

    /// Runs `body` as a test of `group`, once the other group has no test running.
    public static func run<T: Sendable>(_ group: Group, _ body: () async throws -> T) async rethrows -> T {
        await shared.enter(group)
        do {
            let result = try await body()
            await shared.leave()
            return result
        } catch {
            await shared.leave()
            throw error
        }
    }

    private func enter(_ group: Group) async {
        // Join the running group only when nobody of the other group waits for a turn.
        if let current = running, current.group == group, !waiting.contains(where: { $0.group != group }) {
            running = (group, current.count + 1)
            return
        }
        if running == nil && waiting.isEmpty {
            running = (group, 1)
            return
        }
        await withCheckedContinuation { waiting.append((group, $0)) }
    }

    private func leave() {
        guard let current = running else { return }
        if current.count > 1 {
            running = (current.group, current.count - 1)
            return
        }
        running = nil
        guard let next = waiting.first?.group else { return }
        // The next group's turn: admit every waiter of that group.
        let admitted = waiting.filter { $0.group == next }
        waiting.removeAll { $0.group == next }
        running = (next, admitted.count)
        for waiter in admitted { waiter.resume.resume() }
    }
}

/// `@Suite(..., .timingGroup(.measuring))`: the suite's tests run inside ``TimingGate``'s group.
public struct TimingGroupTrait: SuiteTrait, TestTrait, TestScoping {
    public let group: TimingGate.Group
    public var isRecursive: Bool { true }

    public func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        // Per test case (the gate is taken around each test, not around a whole suite).
        guard testCase != nil else { return try await function() }
        try await TimingGate.run(group, function)
    }
}

extension Trait where Self == TimingGroupTrait {
    /// Runs the tests in `group` of ``TimingGate``: `.measuring` for tests that assert wall-clock
    /// bounds, `.heavy` for tests that load both cores in bursts.
    public static func timingGroup(_ group: TimingGate.Group) -> Self { TimingGroupTrait(group: group) }
}
