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

    /// Starts the server (again); returns when it accepts connections.
    public func start() async throws { try await script("start") }

    /// Stops the server (fast shutdown: sessions are ended); the data stays.
    public func stop() async throws { try await script("stop") }

    /// Stops the server and deletes its directory. Best effort.
    public func destroy() async { try? await script("destroy") }

    private func script(_ command: String) async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: BuiltProducts.packageRoot() + "/scripts/pg-local")
        process.arguments = [command]
        var environment = ProcessInfo.processInfo.environment
        environment["TOKENRELAY_PG_DIR"] = directory
        environment["TOKENRELAY_PG_PORT"] = String(port)
        environment["TOKENRELAY_PG_TCP"] = "0"
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        guard status == 0 else { throw TestFailure("scripts/pg-local \(command) exited \(status) for \(directory)") }
    }

    /// A TCP port nobody listens on now (the kernel's pick for port 0). The server uses it for
    /// its socket name only, but a free number keeps it apart from every other server's.
    private static func freePort() throws -> Int {
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
