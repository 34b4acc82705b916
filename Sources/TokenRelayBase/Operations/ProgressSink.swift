/// What a long job tells as it goes (`encryption rotate|rewrap`, `tenants forget`, `keepalive
/// --once`): a phase with the items it will do when known, then the items done. The command
/// line shows it (``CommandProgress``); the service passes none. Called from any
/// thread, the database's included.
package protocol ProgressSink: Sendable {
    /// A new phase: `total` items (nil when not known beforehand).
    func begin(_ phase: String, total: Int?)
    /// `count` more items of the phase done.
    func advance(by count: Int)
    /// The phase is over.
    func end()
}
