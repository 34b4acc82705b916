/// Listens for cross-replica invalidations (``ReplicaInvalidation``) on a direct connection
/// (`TOKENRELAY_DATABASE_LISTEN_URL`, default the main URL) until stopped.
struct InvalidationListener: Service {
    let invalidation: ReplicaInvalidation
    /// libpq URL of the LISTEN connection.
    let url: String

    func run() async {
        invalidation.start(url: url)
        await Lifecycle.untilCancelled()
        invalidation.stop()
    }
}
