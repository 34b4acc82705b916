import PostgresBridge

/// The SQL side of cross-replica invalidation (behaviour §8, §12 Memories and replicas): every write
/// that makes what other replicas hold in memory stale sends a `NOTIFY` inside its own
/// transaction, so it is delivered at COMMIT and only then (PostgreSQL docs, NOTIFY).
enum ReplicaNotifications {
    /// The channel every replica listens on.
    static let channel = "tokenrelay_invalidation"

    /// Queues `message` for delivery when the caller's transaction commits.
    static func send(_ message: ReplicaInvalidation.Message, in connection: PostgresConnection) throws {
        _ = try connection.query("SELECT pg_notify($1, $2)", [.text(channel), .text(message.payload)])
    }
}
