import Foundation
import PostgresBridge

/// Gives each test (suite) an empty database of its own on a private PostgreSQL server.
///
/// The server is the one `TOKENRELAY_TEST_DATABASE_URL` names (a URL of a database on it whose
/// role may `CREATE DATABASE`), else the private server `scripts/pg-local start` runs (found by
/// walking up from this file to the package root). Databases are named `<prefix>_<random>`, so
/// suites running in parallel, even in several processes, never share one.
public enum TestPostgres {
    /// Creates a new, empty database and returns its URL.
    /// - Parameter prefix: the start of the database name (letters, digits, `_`; other characters
    ///   become `_`), e.g. the suite's name.
    /// - Returns: a libpq URL of the new database.
    /// - Throws: when the server cannot be started or reached, or `CREATE DATABASE` fails.
    public static func freshDatabase(named prefix: String) async throws -> String {
        let serverURL = try await server.value
        await staleDatabasesDropped.value
        let name = databaseName(prefix: prefix)
        try await withConnection(url: serverURL) { connection in
            try connection.execute("CREATE DATABASE \"\(name)\"")
        }
        return url(serverURL, database: name)
    }

    /// Runs `body` on a new connection to `url`, then closes it. A connection that cannot be made
    /// is tried twice more, 0.5 s apart, each failure written to stderr with libpq's message: the
    /// test's own look at the database is not what it tests, and one refused connect on a loaded
    /// CI machine (cause not yet known: the message was not kept) failed a whole run.
    /// - Returns: what `body` returns.
    /// - Throws: ``TestDatabaseUnreachable`` with libpq's own message when the connection cannot
    ///   be made (`PostgresError` keeps that message out of its description, for the service's
    ///   logs, but a failed test needs it: "too many clients", "database … does not exist");
    ///   otherwise what `body` throws.
    public static func withConnection<T: Sendable>(
        url: String, _ body: @escaping @Sendable (PostgresConnection) throws -> T
    ) async throws -> T {
        for attempt in 1...3 {
            let pool = PostgresPool(url: url, size: 1)
            defer { pool.close() }
            do {
                return try await pool.withConnection(body)
            } catch let error as PostgresError where error.isConnectionFailure && error.function == "PQconnectdbParams" {
                FileHandle.standardError.write(Data("TestPostgres: connect attempt \(attempt) of 3 failed: \(error.debugDescription)\n".utf8))
                guard attempt < 3 else { throw TestDatabaseUnreachable(description: error.debugDescription) }
                try await Task.sleep(for: .milliseconds(500))
            }
        }
        preconditionFailure("the loop returns or throws")
    }

    /// Runs `body` with the URL of a new, empty database, then drops the database (also when
    /// `body` throws).
    /// - Parameters:
    ///   - prefix: the start of the database name, as for ``freshDatabase(named:)``.
    ///   - body: the test; connections it opened must be closed before it returns.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` or ``freshDatabase(named:)`` throws.
    public static func withFreshDatabase<T>(
        named prefix: String, _ body: (String) async throws -> T
    ) async throws -> T {
        let url = try await freshDatabase(named: prefix)
        do {
            let value = try await body(url)
            await dropDatabase(url: url)
            return value
        } catch {
            await dropDatabase(url: url)
            throw error
        }
    }

    /// A statement that terminates every other client session of the current database (a
    /// failover's or an outage's effect on a replica's connections) and returns their number as
    /// `terminated`. Only client backends: an autovacuum worker busy in a fresh database belongs
    /// to the superuser, and terminating it fails with 42501 for the test's role.
    public static let terminateOtherSessions = """
        SELECT count(*) AS terminated FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend') AS t
        """

    /// Drops a database made by ``freshDatabase(named:)``; errors are ignored (tests clean up best
    /// effort, and the databases live on a throwaway server).
    /// - Parameter url: what ``freshDatabase(named:)`` returned.
    public static func dropDatabase(url databaseURL: String) async {
        do { try await dropDatabaseOrThrow(url: databaseURL) } catch {}
    }

    /// Drops a database made by ``freshDatabase(named:)``.
    /// - Throws: `PostgresError` when the server refuses or cannot be reached.
    public static func dropDatabaseOrThrow(url databaseURL: String) async throws {
        guard let name = databaseName(in: databaseURL) else { return }
        let serverURL = try await server.value
        // PostgreSQL 15 refuses `WITH (FORCE)` (42501) while an autovacuum worker, a superuser
        // process, is in the new database; it leaves soon, so try again for a few seconds.
        for attempt in 1...25 {
            do {
                try await withConnection(url: serverURL) { connection in
                    try connection.execute("DROP DATABASE IF EXISTS \"\(name)\" WITH (FORCE)")
                }
                return
            } catch let error as PostgresError where error.sqlState == "42501" && attempt < 25 {
                try await Task.sleep(for: .milliseconds(200))
            }
        }
    }

    /// The admin URL of the test server, found or started once per process.
    private static let server = Task<String, Error> {
        if let url = ProcessInfo.processInfo.environment["TOKENRELAY_TEST_DATABASE_URL"], !url.isEmpty {
            return url
        }
        let script = BuiltProducts.packageRoot() + "/scripts/pg-local"
        _ = try await run(script, "start")
        return try await run(script, "url").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Test databases older than this are dropped by the first ``freshDatabase(named:)`` of a
    /// process, so runs don't fill the disk (no test runs this long).
    static let staleAge: Int = 6 * 3600

    /// Once per process: drops test databases (named by ``databaseName(prefix:)``) made more than
    /// ``staleAge`` seconds ago. Best effort: failures are ignored.
    private static let staleDatabasesDropped = Task<Void, Never> {
        guard let serverURL = try? await server.value else { return }
        let pool = PostgresPool(url: serverURL, size: 1)
        defer { pool.close() }
        let now = Int(Date().timeIntervalSince1970)
        _ = try? await pool.withConnection { connection in
            let names = try connection.query(#"SELECT datname FROM pg_database WHERE datname ~ '_t[0-9]+_[0-9a-f]+$'"#)
                .rows.compactMap { $0.string("datname") }
            for name in names {
                guard let created = creationTime(ofDatabase: name), now - created > staleAge else { continue }
                try? connection.execute("DROP DATABASE IF EXISTS \"\(name)\" WITH (FORCE)")
            }
        }
    }

    /// `<prefix>_t<unix seconds>_<16 random hex>`, at most 63 bytes (PostgreSQL's NAMEDATALEN - 1).
    static func databaseName(prefix: String) -> String {
        let cleaned = String(prefix.lowercased().map { $0.isASCII && ($0.isLetter || $0.isNumber) ? $0 : "_" })
        let seconds = Int(Date().timeIntervalSince1970)
        let random = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        return "\(cleaned.prefix(30))_t\(seconds)_\(random)"
    }

    /// The unix time embedded by ``databaseName(prefix:)``, or nil for another name.
    static func creationTime(ofDatabase name: String) -> Int? {
        let parts = name.split(separator: "_")
        guard parts.count >= 3, parts[parts.count - 2].first == "t" else { return nil }
        return Int(parts[parts.count - 2].dropFirst())
    }

    /// `url` with its database replaced by `database` (URL path or conninfo `dbname=`).
    static func url(_ url: String, database: String) -> String {
        guard url.hasPrefix("postgresql://") || url.hasPrefix("postgres://"),
            let schemeEnd = url.range(of: "://")
        else {
            // conninfo: a later keyword overrides an earlier one.
            return url + " dbname=\(database)"
        }
        let rest = url[schemeEnd.upperBound...]
        let queryStart = rest.firstIndex(of: "?") ?? rest.endIndex
        let authorityEnd = rest[..<queryStart].firstIndex(of: "/") ?? queryStart
        return url[..<schemeEnd.upperBound] + rest[..<authorityEnd] + "/" + database + rest[queryStart...]
    }

    /// The database named by a URL made by ``url(_:database:)``.
    static func databaseName(in url: String) -> String? {
        if let range = url.range(of: " dbname=", options: .backwards) {
            return String(url[range.upperBound...])
        }
        guard let schemeEnd = url.range(of: "://") else { return nil }
        let rest = url[schemeEnd.upperBound...]
        let queryStart = rest.firstIndex(of: "?") ?? rest.endIndex
        guard let slash = rest[..<queryStart].firstIndex(of: "/") else { return nil }
        let name = rest[rest.index(after: slash)..<queryStart]
        return name.isEmpty ? nil : String(name)
    }

    /// Runs a program and returns its standard output; throws on a non-zero exit.
    ///
    /// Waits through `terminationHandler`: `Process.waitUntilExit()` was seen to hang when called
    /// from a task on Linux, and would block a thread of the task pool anyway.
    private static func run(_ executable: String, _ arguments: String...) async throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try process.runRetryingDescriptorRace()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        // The output is a line or two: it fits in the pipe's buffer, so reading after exit is safe.
        let data = output.fileHandleForReading.readDataToEndOfFile()
        guard status == 0 else {
            throw TestPostgresError("\(executable) \(arguments.joined(separator: " ")) exited \(status)")
        }
        return String(decoding: data, as: UTF8.self)
    }
}

/// Why ``TestPostgres`` could not provide a database.
public struct TestPostgresError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// A test database that could not be reached, with libpq's message (no secrets: a connection
/// message names the host, port, role or database, never a password).
public struct TestDatabaseUnreachable: Error, CustomStringConvertible {
    public let description: String
}
