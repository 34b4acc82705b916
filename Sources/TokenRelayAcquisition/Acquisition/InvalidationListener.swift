import TokenRelayBase

/// Listens for cross-replica invalidations (``ReplicaInvalidation``) on a direct connection
/// (`TOKENRELAY_DATABASE_LISTEN_URL`, default the main URL) until stopped.
package struct InvalidationListener: Service {
    package let invalidation: ReplicaInvalidation
    /// libpq URL of the LISTEN connection.
    package let url: String

    package init(invalidation: ReplicaInvalidation, url: String) {
        self.invalidation = invalidation
        self.url = url
    }

    package func run() async {
        invalidation.start(url: url)
        await Lifecycle.untilCancelled()
        invalidation.stop()
    }
}
