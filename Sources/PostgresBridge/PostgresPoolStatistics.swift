/// A snapshot of a ``PostgresPool`` for `/metrics`.
public struct PostgresPoolStatistics: Sendable, Equatable {
    /// Connections (and worker threads) the pool may hold.
    public var size: Int
    /// Workers running a job right now.
    public var inUse: Int
    /// Jobs queued for a free worker.
    public var waiting: Int
    /// Jobs that, since the pool was made, found every worker busy and had to queue.
    public var totalWaits: Int

    public init(size: Int, inUse: Int, waiting: Int, totalWaits: Int = 0) {
        self.size = size
        self.inUse = inUse
        self.waiting = waiting
        self.totalWaits = totalWaits
    }
}
