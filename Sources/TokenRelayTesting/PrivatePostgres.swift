import Foundation
import Glibc

/// A PostgreSQL server of a test's own, which the test may stop and start (database outage
/// tests). Never the shared `scripts/pg-local` server other suites use: this one lives in its
/// own temporary directory on a free port, made and run by the same script (as the `postgres`
/// user when the tests run as root: initdb refuses root).
public final class PrivatePostgres: Sendable {
    /// The server's directory (data, socket, log), removed by ``destroy()``.
    public let directory: String
    public let port: Int

    /// Initialises and starts a new server.
    /// - Throws: when the script fails (no PostgreSQL binaries, no free port).
    public init() async throws {
        directory = "/tmp/tokenrelay-pg-private-" + UUID().uuidString.prefix(8).lowercased()
        port = try Self.freePort()
        try await start()
    }

    /// The libpq URL of the server's `tokenrelay` database (owned by the `tokenrelay` role).
    public var url: String {
        "postgresql://tokenrelay@/tokenrelay?host=\(directory)/socket&port=\(port)"
    }

    /// The libpq URL of `database` as the server's superuser (the OS user it runs as, `postgres`
    /// under root; trusted on the socket): for `ALTER SYSTEM`, extensions, and statements a test
    /// wants kept apart from the service's own (another role in `pg_stat_statements`).
    public func superuserURL(database: String = "tokenrelay") -> String {
        "postgresql://\(getuid() == 0 ? "postgres" : NSUserName())@/\(database)?host=\(directory)/socket&port=\(port)"
    }

    /// Starts the server (again); returns when it accepts connections.
    public func start() async throws { try await script("start") }

    /// Stops the server (fast shutdown: sessions are ended); the data stays.
    public func stop() async throws { try await script("stop") }

    /// Stops the server and deletes its directory. Best effort.
    public func destroy() async { try? await script("destroy") }

    /// Runs `body` against a new private server and destroys the server afterwards, whether
    /// `body` returned or threw.
    public static func withServer(_ body: (PrivatePostgres) async throws -> Void) async throws {
        let postgres = try await PrivatePostgres()
        do {
            try await body(postgres)
            await postgres.destroy()
        } catch {
            await postgres.destroy()
            throw error
        }
    }

    /// Runs `scripts/pg-local command` for this server and waits for it.
    private func script(_ command: String) async throws {
        var environment = ProcessInfo.processInfo.environment
        environment["TOKENRELAY_PG_DIR"] = directory
        environment["TOKENRELAY_PG_PORT"] = String(port)
        environment["TOKENRELAY_PG_TCP"] = "0"
        try await Self.runScript("pg-local", [command], environment: environment)
    }

    /// Runs `scripts/<name> arguments…` and waits for it.
    ///
    /// Spawned with `posix_spawn` and reaped with `waitpid` on a thread of its own: Foundation's
    /// `Process` never reported the script's exit here, because the server it starts as a daemon
    /// inherits the descriptor `Process` watches.
    /// - Throws: ``TestFailure`` when the script cannot be spawned or exits non-zero.
    static func runScript(_ name: String, _ commandArguments: [String], environment: [String: String]) async throws {
        let path = BuiltProducts.packageRoot() + "/scripts/" + name
        let arguments = [path] + commandArguments
        let variables = environment.map { "\($0.key)=\($0.value)" }
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                let argv = arguments.map { strdup($0) } + [nil]
                let envp = variables.map { strdup($0) } + [nil]
                defer { for pointer in argv + envp { free(pointer) } }
                var pid: pid_t = 0
                let spawned = posix_spawn(&pid, path, nil, nil, argv, envp)
                guard spawned == 0 else {
                    continuation.resume(throwing: TestFailure("posix_spawn \(path) failed: \(spawned)"))
                    return
                }
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                // WIFEXITED/WEXITSTATUS are macros: exited normally when the low 7 bits are 0.
                continuation.resume(returning: status & 0x7f == 0 ? (status >> 8) & 0xff : -1)
            }
        }
        guard status == 0 else {
            throw TestFailure("scripts/\(name) \(commandArguments.joined(separator: " ")) exited \(status) for \(environment["TOKENRELAY_PG_DIR"] ?? "")")
        }
    }

    /// A TCP port nobody listens on now (the kernel's pick for port 0). The server uses it for
    /// its socket name only, but a free number keeps it apart from every other server's.
    static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket() failed") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(descriptor, socketAddress, length) == 0 && getsockname(descriptor, socketAddress, &length) == 0
            }
        }
        guard bound else { throw TestFailure("bind() failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
