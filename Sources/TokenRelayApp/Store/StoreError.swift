import PostgresBridge

/// Why a database operation failed, as the store reports it (in the style of postgres-nio's
/// `PSQLError`: a struct over a code, the detail beside it for the log). Rendered as a problem
/// once, at the edge, by ``Problem/init(_:)-StoreError``.
struct StoreError: Error, Sendable, CustomStringConvertible {
    enum Code: String, Sendable, CaseIterable {
        /// PostgreSQL cannot be reached (connection refused or lost, server shutting down), or the
        /// server reached takes no writes (SQLSTATE 25006: a standby, a demoted primary).
        case unavailable
        /// A value PostgreSQL refused that only caller input can hold (U+0000 in text).
        case invalidInput = "invalid_input"
        /// Any other failure of a statement (a constraint, a bug).
        case failed
    }

    let code: Code
    /// The libpq function and SQLSTATE; safe to log, never a value, never shown to a caller.
    let cause: String

    init(_ error: PostgresError) {
        if error.isConnectionFailure {
            code = .unavailable
        } else if error.code == .invalidParameter {
            code = .invalidInput
        } else {
            code = .failed
        }
        cause = error.description
    }

    var description: String { "StoreError(\(code.rawValue)): \(cause)" }
}

extension Problem {
    /// The one mapping of a store error to the caller's problem (behaviour §4, §5), row by row:
    ///
    /// | code | problem |
    /// |---|---|
    /// | `unavailable` | 503 `upstream_unavailable`, `Retry-After: 2` (`Database.retryAfterSeconds`) |
    /// | `invalid_input` | 400 `invalid_request`, `field: input` |
    /// | `failed` | 500 `internal`, the cause logged |
    init(_ error: StoreError) {
        switch error.code {
        case .unavailable:
            self = Problem.unavailable("The database is unavailable.", retryAfterSeconds: Database.retryAfterSeconds)
        case .invalidInput:
            // Only caller input can hold U+0000; the service never makes one.
            self = Problem.invalidRequest(field: "input", "Text values may not contain NUL (U+0000) characters.")
            return
        case .failed:
            self.init(.internal, "A database operation failed.")
        }
        cause = error.cause
    }

    /// Any error as the problem the caller sees: a problem as it is, the typed domain errors
    /// through their tables, anything else 500 (logged by the handler).
    init(rendering error: any Error) {
        switch error {
        case let problem as Problem: self = problem
        case let error as StoreError: self.init(error)
        case let error as AcquisitionError: self.init(error)
        default:
            self.init(.internal, "An unexpected error occurred.")
            cause = String(describing: type(of: error))
        }
    }
}
