import PostgresBridge
import TokenRelayBase

/// Leases of one-replica background jobs (`job_leases`, ADR 0007): the keep-alive pass and the
/// webhook deliverer. A lease is a row, not a lock, so no transaction or connection stays open
/// while its holder works (behaviour §8), and a holder that dies loses it when it expires.
package struct JobLeaseStore: Sendable {
    package let database: Database

    package init(database: Database) {
        self.database = database
    }

    /// Takes or renews the lease on `job` for `seconds`; false when another holder has it.
    package func acquire(job: String, holder: String, seconds: Int) async throws -> Bool {
        try await database.run { connection in
            !(try connection.query(
                """
                INSERT INTO job_leases (job, holder, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3::double precision))
                ON CONFLICT (job) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
                WHERE job_leases.expires_at < now() OR job_leases.holder = EXCLUDED.holder
                RETURNING holder
                """,
                [.text(job), .text(holder), .int(Int64(seconds))]
            ).rows.isEmpty)
        }
    }

    /// Gives the lease up if `holder` still has it.
    package func release(job: String, holder: String) async throws {
        _ = try await database.run { connection in
            try connection.query("DELETE FROM job_leases WHERE job = $1 AND holder = $2", [.text(job), .text(holder)])
        }
    }
}
