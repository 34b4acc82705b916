import Foundation
import PostgresBridge
import TokenRelayBase

/// Applies `migrations/NNNN_name.sql` in order, each in its own transaction, recorded in
/// `schema_migrations` (behaviour §8). Replicas may run it at once: every step takes a
/// transaction-scoped advisory lock and re-checks what is applied after taking it.
public struct Migrator: Sendable {
    public struct Migration: Sendable, Equatable {
        public let version: String
        public let name: String
        public let sql: String
    }

    public let migrations: [Migration]

    /// Loads the `.sql` files of `directory`, sorted by name.
    /// - Throws: `ConfigurationError` when the directory cannot be read or holds no migration.
    public init(directory: String) throws {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
            throw ConfigurationError(setting: "TOKENRELAY_MIGRATIONS_DIR", reason: "cannot read \(directory)")
        }
        migrations = try names.filter { $0.hasSuffix(".sql") }.sorted().map { file in
            guard let sql = try? String(contentsOfFile: directory + "/" + file, encoding: .utf8) else {
                throw ConfigurationError(setting: "TOKENRELAY_MIGRATIONS_DIR", reason: "cannot read \(file)")
            }
            let stem = String(file.dropLast(4))
            let version = String(stem.prefix { $0.isNumber })
            return Migration(version: version.isEmpty ? stem : version, name: stem, sql: sql)
        }
        guard !migrations.isEmpty else {
            throw ConfigurationError(setting: "TOKENRELAY_MIGRATIONS_DIR", reason: "no .sql files in \(directory)")
        }
        // `schema_migrations` is keyed by the number: a second file with it would never run.
        for (earlier, later) in zip(migrations, migrations.dropFirst()) where earlier.version == later.version {
            throw ConfigurationError(
                setting: "TOKENRELAY_MIGRATIONS_DIR", reason: "\(earlier.name) and \(later.name) share the number \(later.version); renumber one")
        }
    }

    /// The migrations directory: the configured one, else `migrations/` in the working
    /// directory, beside the executable's package (`.build/<config>/token-relay`), or the
    /// installed share directory.
    public static func locateDirectory(configured: String?) -> String? {
        if let configured { return configured }
        let executable = URL(fileURLWithPath: CommandLine.arguments.first ?? "").resolvingSymlinksInPath().deletingLastPathComponent()
        let candidates = [
            FileManager.default.currentDirectoryPath + "/migrations",
            executable.appendingPathComponent("../../../migrations").standardizedFileURL.path,
            executable.appendingPathComponent("../share/token-relay/migrations").standardizedFileURL.path,
            "/usr/share/token-relay/migrations",
        ]
        return candidates.first { FileManager.default.fileExists(atPath: $0 + "/0001_initial.sql") }
    }

    /// Applies what is pending. Returns the versions this call applied.
    public func apply(on pool: PostgresPool) async throws -> [String] {
        var applied: [String] = []
        for migration in migrations {
            let didApply = try await pool.withConnection { connection in
                try connection.transaction { connection -> Bool in
                    _ = try connection.query("SELECT pg_advisory_xact_lock(hashtextextended('tokenrelay.migrate', 0))")
                    try connection.execute(
                        "CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
                    )
                    let done = try connection.query("SELECT 1 FROM schema_migrations WHERE version = $1", [.text(migration.version)]).rows
                    guard done.isEmpty else { return false }
                    try connection.execute(migration.sql)
                    _ = try connection.query(
                        "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", [.text(migration.version), .text(migration.name)])
                    return true
                }
            }
            if didApply { applied.append(migration.version) }
        }
        return applied
    }

    /// Versions not yet applied (readiness: "migrations current").
    public func pending(on connection: PostgresConnection) throws -> [String] {
        let exists = try connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL AS present").rows.first?.bool("present") ?? false
        guard exists else { return migrations.map(\.version) }
        let done = Set(try connection.query("SELECT version FROM schema_migrations").rows.compactMap { $0.string("version") })
        return migrations.map(\.version).filter { !done.contains($0) }
    }
}
