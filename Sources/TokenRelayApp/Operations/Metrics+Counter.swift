import Synchronization

extension Metrics {
    /// One counter series (name and labels resolved once) that hot paths bump without a lock
    /// or label rendering (SPEC §10). `/metrics` shows it like any other series, and only once
    /// it is non-zero, as a series incremented through ``Metrics/increment(_:_:by:)`` is.
    public final class Counter: Sendable {
        private let count = Atomic<UInt64>(0)

        init() {}

        public func increment() {
            count.add(1, ordering: .relaxed)
        }

        var value: Double { Double(count.load(ordering: .relaxed)) }
    }
}
