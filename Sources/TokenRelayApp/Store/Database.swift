import Foundation
import PostgresBridge

/// The PostgreSQL pool as the application sees it: every database failure becomes a
/// ``StoreError`` (rendered at the edge: 503 `upstream_unavailable` with `Retry-After` when the
/// server is unreachable, behaviour §5).
struct Database: Sendable {
    let pool: PostgresPool

    /// Seconds a caller is told to wait while the database is unreachable.
    static let retryAfterSeconds = 2

    /// Runs `body` on a pool worker thread inside one transaction.
    func transaction<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        try await run { connection in try connection.transaction(body) }
    }

    /// Runs `body` on a pool worker thread holding one connection.
    /// - Throws: ``StoreError`` for a database failure; `body`'s own errors as they are.
    func run<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        do {
            return try await pool.withConnection(body)
        } catch let error as PostgresError {
            throw StoreError(error)
        }
    }
}
