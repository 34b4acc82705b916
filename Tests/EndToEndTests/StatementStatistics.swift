import PostgresBridge
import TokenRelayTesting

/// A private PostgreSQL with `pg_stat_statements` loaded (track = all, so statements inside
/// functions count too), for the tests that count what the service asks the database.
struct StatementStatistics {
    let postgres: PrivatePostgres
    /// The superuser's pool: the test's own statements, kept apart from the service's role.
    let admin: PostgresPool

    /// Runs `body` on a new private server with the extension ready; the server is destroyed
    /// afterwards, also when `body` throws.
    static func withServer(_ body: (StatementStatistics) async throws -> Void) async throws {
        let postgres = try await PrivatePostgres()
        let admin = PostgresPool(url: postgres.superuserURL(), size: 1)
        do {
            try await admin.withConnection { try $0.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'") }
            try await postgres.stop()
            try await postgres.start()
            // Its settings exist once the library is loaded; both take a reload.
            try await admin.withConnection { connection in
                try connection.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                try connection.execute("ALTER SYSTEM SET pg_stat_statements.track = 'all'")
                try connection.execute("ALTER SYSTEM SET pg_stat_statements.track_utility = 'off'")
                _ = try connection.query("SELECT pg_reload_conf()")
            }
            try await body(StatementStatistics(postgres: postgres, admin: admin))
            admin.close()
            await postgres.destroy()
        } catch {
            admin.close()
            await postgres.destroy()
            throw error
        }
    }

    /// Forgets what was counted so far.
    func reset() async throws {
        try await admin.withConnection { _ = try $0.query("SELECT pg_stat_statements_reset()") }
    }

    /// The service's statements (role `tokenrelay`, this database) since the last reset, as
    /// PostgreSQL normalised them, with their calls.
    func serviceStatements() async throws -> [(query: String, calls: Int64)] {
        try await admin.withConnection { connection in
            try connection.query(
                """
                SELECT s.query, s.calls FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid
                WHERE r.rolname = 'tokenrelay' AND s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                """
            ).rows.compactMap { row in row.string("query").map { ($0, row.int("calls") ?? 0) } }
        }
    }
}
