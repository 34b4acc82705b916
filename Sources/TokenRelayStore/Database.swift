import Foundation
import PostgresBridge
import TokenRelayBase

/// The PostgreSQL pool as the application sees it: every database failure becomes a
/// ``StoreError`` (rendered at the edge: 503 `upstream_unavailable` with `Retry-After` when the
/// server is unreachable, behaviour §5).
package struct Database: Sendable {
    package let pool: PostgresPool

    package init(pool: PostgresPool) {
        self.pool = pool
    }

    /// Seconds a caller is told to wait while the database is unreachable.
    package static let retryAfterSeconds = 2

    /// Runs `body` on a pool worker thread inside one transaction.
    package func transaction<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        try await run { connection in try connection.transaction(body) }
    }

    /// Runs `body` on a pool worker thread holding one connection.
    ///
    /// When `body` needs a tenant's data key that is not in memory (``DataKeyNeeded``), the key is
    /// loaded after the connection went back to the pool (a transaction rolled back) and `body`
    /// runs again: the key-encryption key, perhaps an HSM across a network, never works while a
    /// connection is held.
    /// - Throws: ``StoreError`` for a database failure; `body`'s own errors as they are.
    package func run<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        var loads = 0
        // The request's trace, when recorded: each statement becomes a span (behaviour §8.11).
        let statements = Tracing.current.flatMap(StatementSpans.init)
        while true {
            do {
                guard let statements else { return try await pool.withConnection(body) }
                return try await pool.withConnection { connection in try connection.observingStatements(statements.record) { try body(connection) } }
            } catch let error as PostgresError {
                throw StoreError(error)
            } catch let needed as DataKeyNeeded where loads < Self.maxDataKeyLoads {
                // A statement may need several tenants' keys (a rotation batch); each load adds one.
                loads += 1
                try await needed.load()
            }
        }
    }

    /// Data keys loaded for one ``run(_:)`` at most before ``DataKeyNeeded`` reaches the caller.
    package static let maxDataKeyLoads = 64
}

/// Turns the statements a ``Database/run(_:)`` runs into client spans of the task's current span
/// (OpenTelemetry database semantic conventions: `db.system.name`, `db.operation.name`,
/// `error.type`); never the statement's text or parameters. Recorded on the pool's thread into
/// the tracer's queue, which never waits.
struct StatementSpans: Sendable {
    let parent: TraceContext
    let tracer: Tracer

    init?(_ active: ActiveSpan) {
        guard let tracer = active.tracer else { return nil }
        parent = active.context
        self.tracer = tracer
    }

    @Sendable func record(_ statement: PostgresStatement) {
        var attributes: [(String, SpanRecord.Value)] = [("db.system.name", .string("postgresql"))]
        if let operation = statement.operation { attributes.append(("db.operation.name", .string(operation))) }
        if let errorType = statement.errorType { attributes.append(("error.type", .string(errorType))) }
        tracer.record(
            SpanRecord(
                name: statement.operation ?? "postgresql", kind: .client, context: parent.child(), parentSpanId: parent.spanId,
                startNanos: statement.startNanos, endNanos: statement.endNanos, attributes: attributes, failed: statement.errorType != nil))
    }
}
