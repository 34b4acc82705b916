import Foundation
import PostgresBridge

/// The PostgreSQL pool as the application sees it: every database failure becomes a problem
/// (503 `upstream_unavailable` with `Retry-After` when the server is unreachable, SPEC §5).
struct Database: Sendable {
    let pool: PostgresPool

    /// Seconds a caller is told to wait while the database is unreachable.
    static let retryAfterSeconds = 2

    /// Runs `body` on a pool worker thread inside one transaction.
    func transaction<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        try await run { connection in try connection.transaction(body) }
    }

    /// Runs `body` on a pool worker thread holding one connection.
    func run<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        do {
            return try await pool.withConnection(body)
        } catch let error as PostgresError {
            throw Self.problem(for: error)
        }
    }

    static func problem(for error: PostgresError) -> Problem {
        if error.isConnectionFailure {
            var problem = Problem.unavailable("The database is unavailable.", retryAfterSeconds: retryAfterSeconds)
            problem.cause = error.description
            return problem
        }
        if error.code == .invalidParameter {
            // Only caller input can hold U+0000; the service never makes one.
            return Problem.invalidRequest(field: "input", "Text values may not contain NUL (U+0000) characters.")
        }
        var problem = Problem(.internal, "A database operation failed.")
        problem.cause = error.description  // safe: names the libpq function and SQLSTATE, never a value
        return problem
    }
}
