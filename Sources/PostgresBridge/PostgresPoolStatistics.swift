/// A snapshot of a ``PostgresPool`` for `/metrics`.
public struct PostgresPoolStatistics: Sendable, Equatable {
    /// Connections (and worker threads) the pool may hold.
    public var size: Int
    /// Workers running a job right now.
    public var inUse: Int
    /// Jobs queued for a free worker.
    public var waiting: Int

    public init(size: Int, inUse: Int, waiting: Int) {
        self.size = size
        self.inUse = inUse
        self.waiting = waiting
    }
}
