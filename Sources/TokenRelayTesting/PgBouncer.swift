import Foundation
import Glibc
import PostgresBridge

/// Debian's pgbouncer in front of one test database, in transaction pooling mode: what a
/// production deployment with many replicas puts between them and PostgreSQL (behaviour §8). Tests
/// give replicas ``url`` as `TOKENRELAY_DATABASE_URL` and the direct URL as
/// `TOKENRELAY_DATABASE_LISTEN_URL` (LISTEN needs a session, which transaction pooling does not
/// keep), so that every statement the service runs is multiplexed over a pool smaller than the
/// replicas' combined pools, as it would be in production.
///
/// pgbouncer listens only on a unix socket in a directory of its own (config, auth file and
/// socket; removed by ``stop()``): no TCP port to race other test runs for. Its log is its
/// standard error, in ``TestLogs/directory`` (scanned for secrets by `make test`). pgbouncer
/// refuses to run as root, so as root the config makes it switch to the `postgres` user (as
/// `scripts/pg-local` runs the server) and the directory belongs to that user.
public final class PgBouncer: Sendable {
    /// The directory holding `pgbouncer.ini`, `userlist.txt` and the socket.
    public let directory: String
    /// The port, which only names the socket (`.s.PGSQL.<port>`) in ``directory``.
    public let port = 6432
    /// The database name clients use: the same as the server's, so URLs differ only in host and port.
    public let database: String
    /// The role clients log in as (also the admin console's user).
    public let user: String
    /// Server connections pgbouncer opens to the database (`default_pool_size`).
    public let poolSize: Int
    private let process: ManagedProcess

    /// Writes a config for `databaseURL` and starts pgbouncer; returns once a query through it
    /// has reached the database.
    /// - Parameters:
    ///   - databaseURL: the direct libpq URL (`postgresql://` or conninfo) of the database, whose
    ///     server accepts the role without a password from this machine or names the password.
    ///   - poolSize: server connections for all clients together; keep it below the replicas'
    ///     combined `TOKENRELAY_DATABASE_POOL_SIZE`, so that pooling really multiplexes.
    ///   - maxClientConnections: client connections pgbouncer accepts (replicas × pool size,
    ///     plus CLI runs and the test's own).
    /// - Throws: ``TestFailure`` when pgbouncer is not installed, or does not serve within 30 s.
    public init(databaseURL: String, poolSize: Int = 5, maxClientConnections: Int = 100) async throws {
        let server = Self.connectionParameters(of: databaseURL)
        user = server["user"] ?? NSUserName()
        database = server["dbname"] ?? user
        self.poolSize = poolSize
        let executable = try Self.executable()
        // Under /tmp, not TMPDIR: that may sit under /root (mode 700), out of the postgres user's reach.
        directory = "/tmp/tokenrelay-pgbouncer-" + UUID().uuidString.prefix(8).lowercased()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        do {
            try Self.writeConfig(
                in: directory, port: port, database: database, user: user, server: server, poolSize: poolSize,
                maxClientConnections: maxClientConnections)
            process = try ManagedProcess(
                executable: executable, arguments: [directory + "/pgbouncer.ini"], environment: ProcessInfo.processInfo.environment, port: port)
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        do {
            try await waitUntilServing()
        } catch {
            stop()
            throw error
        }
    }

    /// The libpq URL of the database through pgbouncer (for `TOKENRELAY_DATABASE_URL`).
    public var url: String { url(database: database) }

    /// The URL of pgbouncer's admin console (the virtual `pgbouncer` database; `SHOW …`).
    public var adminURL: String { url(database: "pgbouncer") }

    /// Runs `SHOW <list>` (e.g. `STATS`, `POOLS`, `CLIENTS`, `SERVERS`) on the admin console and
    /// returns its rows, column name to value.
    ///
    /// Through `psql`: the admin console speaks only the simple query protocol, and
    /// `PostgresConnection.query` uses the extended one.
    /// - Throws: ``TestFailure`` when `psql` fails.
    public func show(_ list: String) async throws -> [[String: String]] {
        let separator = "\u{1F}"
        let output = try await Self.psql(["-X", "-q", "-A", "-F", separator, "-P", "footer=off", "-d", adminURL, "-c", "SHOW \(list)"])
        let lines = output.split(separator: "\n").map { $0.components(separatedBy: separator) }
        guard let header = lines.first else { return [] }
        return lines.dropFirst().map { Dictionary(zip(header, $0), uniquingKeysWith: { first, _ in first }) }
    }

    /// The integer columns of `SHOW <list>` summed over this database's rows, e.g.
    /// `counters("STATS")["total_xact_count"]` or `counters("POOLS")["sv_active"]`.
    public func counters(_ list: String) async throws -> [String: Int] {
        var sums: [String: Int] = [:]
        for row in try await show(list) where row["database"] == database {
            for (column, value) in row { if let number = Int(value) { sums[column, default: 0] += number } }
        }
        return sums
    }

    /// Stops pgbouncer (SIGTERM: immediate shutdown, clients are disconnected) and removes its
    /// directory. Stop the replicas first.
    public func stop() {
        process.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { stop() }

    private func url(database: String) -> String {
        let unreserved = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))
        let encode = { (text: String) in text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text }
        return "postgresql://\(encode(user))@/\(encode(database))?host=\(directory)&port=\(port)"
    }

    /// Polls a query through pgbouncer to the database until it answers: pgbouncer listens, and
    /// it can log in to the server.
    private func waitUntilServing() async throws {
        let pool = PostgresPool(url: url, size: 1)
        defer { pool.close() }
        let deadline = Date().addingTimeInterval(30)
        var lastError: Error?
        while Date() < deadline {
            guard process.isRunning else { break }
            do {
                try await pool.withConnection { connection in _ = try connection.query("SELECT 1") }
                return
            } catch {
                lastError = error
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        throw TestFailure(
            "pgbouncer did not serve \(database) within 30 s (\(lastError.map { "\($0)" } ?? "it exited")); log:\n\(process.log().suffix(2000))")
    }

    /// Writes `pgbouncer.ini` and `userlist.txt` into `directory`, and hands the directory to the
    /// `postgres` user when running as root.
    private static func writeConfig(
        in directory: String, port: Int, database: String, user: String, server: [String: String], poolSize: Int, maxClientConnections: Int
    ) throws {
        // libpq's defaults (Debian's socket directory) where the URL names nothing: pgbouncer's
        // own default would be its unix_socket_dir, i.e. itself.
        var target = [
            "host": server["host"] ?? "/var/run/postgresql", "port": server["port"] ?? "5432", "dbname": database, "user": user,
        ]
        if let password = server["password"] { target["password"] = password }
        for (key, value) in target where value.isEmpty || value.contains(where: { $0.isWhitespace || $0 == "'" || $0 == "\"" }) {
            throw TestFailure("PgBouncer: the database URL's \(key) is empty or has spaces or quotes")
        }
        let runAs = getuid() == 0 ? getpwnam("postgres") : nil
        if getuid() == 0 && runAs == nil { throw TestFailure("PgBouncer: running as root, but there is no postgres user to run pgbouncer as") }
        let connection = ["host", "port", "dbname", "user", "password"].compactMap { key in target[key].map { "\(key)=\($0)" } }
        let config = """
            ; Written by TokenRelayTesting's PgBouncer for one test.
            [databases]
            \(database) = \(connection.joined(separator: " "))

            [pgbouncer]
            ; Unix socket only, in this directory.
            listen_addr =
            listen_port = \(port)
            unix_socket_dir = \(directory)
            ; What production uses with many replicas (behaviour §8): a server connection per transaction.
            pool_mode = transaction
            default_pool_size = \(poolSize)
            max_db_connections = \(poolSize)
            min_pool_size = 0
            reserve_pool_size = 0
            max_client_conn = \(maxClientConnections)
            ; The test server trusts local connections; pgbouncer trusts the users listed here.
            auth_type = trust
            auth_file = \(directory)/userlist.txt
            admin_users = \(user)
            ; Retry a failed server login soon, not after the default 15 s.
            server_login_retry = 1
            ; libpq sends only parameters pgbouncer tracks (application_name); other drivers
            ; (JDBC) send extra_float_digits, which production configs ignore too.
            ignore_startup_parameters = extra_float_digits
            ; The log is standard error (into the test log directory); no daemon, no pid file.
            logfile =
            pidfile =
            \(runAs != nil ? "; pgbouncer refuses to run as root.\nuser = postgres" : "")

            """
        // Owner-only files: the config holds the server password when the URL names one.
        let files = [directory + "/pgbouncer.ini": config, directory + "/userlist.txt": "\"\(user)\" \"\"\n"]
        for (path, text) in files {
            guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
                throw TestFailure("PgBouncer: cannot write \(path)")
            }
        }
        if let runAs {
            for path in [directory] + files.keys {
                guard chown(path, runAs.pointee.pw_uid, runAs.pointee.pw_gid) == 0 else {
                    throw TestFailure("PgBouncer: chown \(path) failed: errno \(errno)")
                }
            }
        }
    }

    /// Debian's `/usr/sbin/pgbouncer`, else the first on `PATH`.
    private static func executable() throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let candidates = ["/usr/sbin/pgbouncer"] + path.split(separator: ":").map { $0 + "/pgbouncer" }
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw TestFailure("pgbouncer is not installed (scripts/install-deps installs it)")
        }
        return found
    }

    /// The connection parameters a libpq URL or conninfo string names (`host`, `port`, `user`,
    /// `password`, `dbname`, and any other keyword as given). Enough for the URLs tests use;
    /// host lists and `PG*` environment defaults are not read.
    static func connectionParameters(of url: String) -> [String: String] {
        var parameters: [String: String] = [:]
        guard url.hasPrefix("postgresql://") || url.hasPrefix("postgres://"), let schemeEnd = url.range(of: "://") else {
            // conninfo: `key = value` pairs; a value may be single-quoted, `\` escapes a character.
            var characters = Substring(url)
            func skipSpaces() { characters = characters.drop(while: \.isWhitespace) }
            while true {
                skipSpaces()
                guard !characters.isEmpty else { break }
                let key = String(characters.prefix(while: { $0 != "=" && !$0.isWhitespace }))
                characters = characters.dropFirst(key.count)
                skipSpaces()
                guard characters.first == "=" else { break }
                characters = characters.dropFirst()
                skipSpaces()
                let quoted = characters.first == "'"
                if quoted { characters = characters.dropFirst() }
                var value = ""
                while let character = characters.first, quoted ? character != "'" : !character.isWhitespace {
                    characters = characters.dropFirst()
                    if character == "\\", let escaped = characters.first {
                        value.append(escaped)
                        characters = characters.dropFirst()
                    } else {
                        value.append(character)
                    }
                }
                if quoted { characters = characters.dropFirst() }
                parameters[key] = value
            }
            return parameters
        }
        let decode = { (text: Substring) in text.removingPercentEncoding ?? String(text) }
        let rest = url[schemeEnd.upperBound...]
        let queryStart = rest.firstIndex(of: "?") ?? rest.endIndex
        let pathStart = rest[..<queryStart].firstIndex(of: "/") ?? queryStart
        var authority = rest[..<pathStart]
        if let at = authority.lastIndex(of: "@") {
            let credentials = authority[..<at].split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            if let name = credentials.first, !name.isEmpty { parameters["user"] = decode(name) }
            if credentials.count == 2 { parameters["password"] = decode(credentials[1]) }
            authority = authority[authority.index(after: at)...]
        }
        // host, host:port, [v6], [v6]:port
        var host = authority
        var port: Substring = ""
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            host = authority[authority.index(after: authority.startIndex)..<close]
            port = authority[authority.index(after: close)...].drop(while: { $0 == ":" })
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            port = authority[authority.index(after: colon)...]
        }
        if !host.isEmpty { parameters["host"] = decode(host) }
        if !port.isEmpty { parameters["port"] = decode(port) }
        if pathStart < queryStart {
            let name = rest[rest.index(after: pathStart)..<queryStart]
            if !name.isEmpty { parameters["dbname"] = decode(name) }
        }
        if queryStart < rest.endIndex {
            for pair in rest[rest.index(after: queryStart)...].split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                if parts.count == 2 { parameters[decode(parts[0])] = decode(parts[1]) }
            }
        }
        return parameters
    }

    /// Runs PostgreSQL's `psql` (the newest installed) with `arguments` and returns its standard
    /// output; throws with its standard error on a non-zero exit.
    private static func psql(_ arguments: [String]) async throws -> String {
        let installed = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        let newest = installed.compactMap(Int.init).sorted().last.map { "/usr/lib/postgresql/\($0)/bin/psql" }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: newest.flatMap { FileManager.default.isExecutableFile(atPath: $0) ? $0 : nil } ?? "/usr/bin/psql")
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.runRetryingDescriptorRace()
        // Read until EOF on a thread of its own (never a task-pool thread), then reap the child.
        let (data, message): (Data, Data) = await onOwnThread {
            let data = output.fileHandleForReading.readDataToEndOfFile()
            let message = errors.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (data, message)
        }
        guard process.terminationStatus == 0 else {
            throw TestFailure("psql \(arguments.last ?? "") exited \(process.terminationStatus): \(String(decoding: message, as: UTF8.self))")
        }
        return String(decoding: data, as: UTF8.self)
    }
}
