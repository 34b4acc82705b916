/// A failure of libpq or of the server, naming the libpq function that reported it.
///
/// `description` is safe to log: it never contains a parameter value, a row value or the
/// connection URL's password. The server's own message (which may quote a value, e.g. `invalid
/// input syntax for type integer: "…"`) is only in ``serverMessage`` and `debugDescription`.
public struct PostgresError: Error, CustomStringConvertible, CustomDebugStringConvertible {
    /// A bounded kind of failure; ``PostgresError/code`` gives its metric label.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable {
            case connectionFailure = "connection_failure"
            case queryFailed = "query_failed"
            case transactionRolledBack = "transaction_rolled_back"
            case poolClosed = "pool_closed"
            case unexpectedResult = "unexpected_result"
            case invalidParameter = "invalid_parameter"
        }

        private let base: Base

        /// The server is unreachable, refused us, or the connection was lost.
        public static let connectionFailure = Code(base: .connectionFailure)
        /// The server rejected a statement (see ``PostgresError/sqlState``).
        public static let queryFailed = Code(base: .queryFailed)
        /// COMMIT reported ROLLBACK: an error inside the transaction was caught and ignored.
        public static let transactionRolledBack = Code(base: .transactionRolledBack)
        /// A parameter cannot be sent (a text value containing U+0000, which PostgreSQL rejects).
        public static let invalidParameter = Code(base: .invalidParameter)
        /// The pool was closed before the work could run.
        public static let poolClosed = Code(base: .poolClosed)
        /// libpq returned something this bridge does not handle (e.g. COPY).
        public static let unexpectedResult = Code(base: .unexpectedResult)

        /// A short snake_case label, one of a fixed set (usable as a Prometheus label value).
        public var description: String { base.rawValue }
    }

    /// What kind of failure this is.
    public var code: Code
    /// The libpq function that reported it, e.g. `PQexecParams`.
    public var function: String
    /// The SQLSTATE the server sent (e.g. `23505` unique_violation), nil when none.
    /// Source: PostgreSQL docs, Appendix A "PostgreSQL Error Codes".
    public var sqlState: String?
    /// The primary message from libpq or the server. May quote values: not for logs or clients.
    public var serverMessage: String?

    /// True when the server is unreachable, the connection was lost, or the server it reached no
    /// longer takes writes (SQLSTATE 25006): the pool reconnects on next use, and the caller should treat the database as down (behaviour §5), not the request as bad.
    public var isConnectionFailure: Bool { code == .connectionFailure }

    /// True for SQLSTATE 23505 (unique_violation).
    public var isUniqueViolation: Bool { sqlState == "23505" }

    public init(code: Code, function: String, sqlState: String? = nil, serverMessage: String? = nil) {
        self.code = code
        self.function = function
        self.sqlState = sqlState
        self.serverMessage = serverMessage
    }

    /// The metric label of ``code``.
    public var label: String { code.description }

    public var description: String {
        var text = "PostgreSQL \(function) failed: \(code)"
        if let sqlState { text += " (SQLSTATE \(sqlState))" }
        return text
    }

    public var debugDescription: String {
        guard let serverMessage, !serverMessage.isEmpty else { return description }
        return description + ": " + serverMessage
    }

    /// Whether a SQLSTATE names a lost or refused connection rather than a bad statement:
    /// class 08 (connection exception), 57P01–57P03 (admin/crash shutdown, cannot connect now),
    /// and 25006 (read_only_sql_transaction): the session sits on a server that no longer takes
    /// writes (a standby, or a primary demoted by a failover), so the statement is not at fault
    /// and a new connection, which a multi-host URL with `target_session_attrs=read-write` sends
    /// to the new primary, is the remedy (docs/failover.md).
    static func isConnectionState(_ sqlState: String) -> Bool {
        sqlState.hasPrefix("08") || ["57P01", "57P02", "57P03", "25006"].contains(sqlState)
    }
}
