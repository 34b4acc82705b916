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

extension Metrics {
    /// One histogram series (name and labels resolved once) that hot paths observe under a lock
    /// of its own, without label rendering (SPEC §10); `/metrics` adds it to the series of the
    /// same name and labels.
    final class HistogramSeries: Sendable {
        private let histogram = Mutex(Histogram())

        func observe(_ seconds: Double) {
            histogram.withLock { $0.observe(seconds) }
        }

        var snapshot: Histogram { histogram.withLock { $0 } }
    }
}
