import Foundation

/// A PostgreSQL primary with a streaming standby, of a test's own, for failover tests: what a
/// managed HA PostgreSQL is underneath (docs/failover.md). Made and driven by
/// `scripts/pg-replicated` (which builds the primary with `scripts/pg-local`, as
/// ``PrivatePostgres`` does): the standby is a `pg_basebackup -R` copy streaming through a
/// replication slot, and the primary runs `synchronous_commit = on` with the standby in
/// `synchronous_standby_names`, so a COMMIT returns only once the standby has flushed it.
///
/// Both servers listen on 127.0.0.1 on free ports; ``url`` is the libpq multi-host URL with
/// `target_session_attrs=read-write` (libpq docs, "Connection Strings" §34.1.1 and
/// `target_session_attrs`), which connects to whichever of the two accepts writes.
public final class ReplicatedPostgres: Sendable {
    /// The pair's directory (`primary/` and `standby/`), removed by ``destroy()``.
    public let directory: String
    public let primaryPort: Int
    public let standbyPort: Int

    /// Initialises and starts the primary, copies it into the standby, starts that, and returns
    /// once the standby streams synchronously.
    /// - Throws: ``TestFailure`` when the script fails (no PostgreSQL binaries, a port taken).
    public init() async throws {
        directory = "/tmp/tokenrelay-pg-replicated-" + UUID().uuidString.prefix(8).lowercased()
        primaryPort = try PrivatePostgres.freePort()
        var standby = try PrivatePostgres.freePort()
        while standby == primaryPort { standby = try PrivatePostgres.freePort() }
        standbyPort = standby
        do {
            try await script("start")
        } catch {
            await destroy()
            throw error
        }
    }

    /// `postgresql://tokenrelay@127.0.0.1:P1,127.0.0.1:P2/tokenrelay?target_session_attrs=read-write`:
    /// libpq tries the hosts in order and keeps the first that is not read-only.
    public var url: String {
        "postgresql://tokenrelay@127.0.0.1:\(primaryPort),127.0.0.1:\(standbyPort)/tokenrelay?target_session_attrs=read-write"
    }

    /// The first server alone (the primary until ``stopPrimary(mode:)``).
    public var primaryURL: String { "postgresql://tokenrelay@127.0.0.1:\(primaryPort)/tokenrelay" }

    /// The second server alone: read-only until ``promote()``, a writable primary after.
    public var standbyURL: String { "postgresql://tokenrelay@127.0.0.1:\(standbyPort)/tokenrelay" }

    /// Stops the primary. `immediate` (the default) is a crash as far as the standby can tell:
    /// no shutdown checkpoint, no last WAL sent; `fast` ends sessions and shuts down cleanly.
    public func stopPrimary(mode: String = "immediate") async throws { try await script("stop-primary", mode) }

    /// Promotes the standby (`pg_ctl promote`); returns when it accepts writes.
    public func promote() async throws { try await script("promote") }

    /// Stops both servers and deletes the directory. Best effort.
    public func destroy() async { try? await script("destroy") }

    private func script(_ arguments: String...) async throws {
        var environment = ProcessInfo.processInfo.environment
        environment["TOKENRELAY_PG_DIR"] = directory
        environment["TOKENRELAY_PG_PORT"] = String(primaryPort)
        environment["TOKENRELAY_PG_STANDBY_PORT"] = String(standbyPort)
        try await PrivatePostgres.runScript("pg-replicated", arguments, environment: environment)
    }
}
