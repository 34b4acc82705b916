/// What a byte-bounded cache holds and has dropped, for `/metrics`.
package struct MemoryUsage: Sendable, Equatable {
    package var bytes = 0
    package var entries = 0
    /// Entries dropped to make room since start (not removals asked for).
    package var evictions = 0

    package init(bytes: Int = 0, entries: Int = 0, evictions: Int = 0) {
        self.bytes = bytes
        self.entries = entries
        self.evictions = evictions
    }
}
