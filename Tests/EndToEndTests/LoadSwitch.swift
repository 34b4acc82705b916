import Synchronization

/// Shared by a test and the load it runs: whether the load should stop, and the requests served.
final class LoadSwitch: Sendable {
    private let stopped = Atomic(false)
    private let count = Atomic(0)

    var isStopped: Bool { stopped.load(ordering: .relaxed) }
    var served: Int { count.load(ordering: .relaxed) }

    func stop() { stopped.store(true, ordering: .relaxed) }
    func countServed() { count.add(1, ordering: .relaxed) }
}
