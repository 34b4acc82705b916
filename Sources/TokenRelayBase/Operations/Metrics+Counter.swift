import Synchronization

extension Metrics {
    /// One counter series (name and labels resolved once) that hot paths bump without a lock
    /// or label rendering (behaviour §10). `/metrics` shows it like any other series, and only once
    /// it is non-zero, as a series incremented through ``Metrics/increment(_:_:by:)`` is.
    public final class Counter: Sendable {
        private let count = Atomic<UInt64>(0)

        package init() {}

        public func increment() {
            count.add(1, ordering: .relaxed)
        }

        /// Adds `amount` (a batch counted at once).
        package func add(_ amount: Int) {
            count.add(UInt64(max(0, amount)), ordering: .relaxed)
        }

        package var value: Double { Double(count.load(ordering: .relaxed)) }
    }
}

extension Metrics {
    /// One histogram series (name and labels resolved once) that hot paths observe without a
    /// lock or label rendering (behaviour §10): one atomic add for the bucket the value falls in, one
    /// for the sum in nanoseconds (the count is the buckets' total); `/metrics` makes the buckets cumulative
    /// and adds the series to any of the same name and labels. (A lock here, shared by every
    /// server thread, cost more under load than the whole answer's JSON.)
    package final class HistogramSeries: Sendable {
        private final class Cell: Sendable {
            let value = Atomic<UInt64>(0)
        }

        /// One cell per bound, then one for values above every bound.
        private let cells = (0...Histogram.bounds.count).map { _ in Cell() }
        private let nanoseconds = Cell()

        package func observe(_ seconds: Double) {
            let index = Histogram.bounds.firstIndex { seconds <= $0 } ?? Histogram.bounds.count
            cells[index].value.add(1, ordering: .relaxed)
            nanoseconds.value.add(UInt64(max(0, seconds) * 1e9), ordering: .relaxed)
        }

        package var snapshot: Histogram {
            var histogram = Histogram()
            var cumulative: UInt64 = 0
            for index in Histogram.bounds.indices {
                cumulative += cells[index].value.load(ordering: .relaxed)
                histogram.buckets[index] = cumulative
            }
            histogram.count = cumulative + cells[Histogram.bounds.count].value.load(ordering: .relaxed)
            histogram.sum = Double(nanoseconds.value.load(ordering: .relaxed)) / 1e9
            return histogram
        }
    }
}
