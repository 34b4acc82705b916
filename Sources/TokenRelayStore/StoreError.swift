import PostgresBridge
import TokenRelayBase

/// Why a database operation failed, as the store reports it (in the style of postgres-nio's
/// `PSQLError`: a struct over a code, the detail beside it for the log). Rendered as a problem
/// once, at the edge, by ``RelayError/init(_:)-StoreError``.
package struct StoreError: Error, Sendable, CustomStringConvertible {
    package enum Code: String, Sendable, CaseIterable {
        /// PostgreSQL cannot be reached (connection refused or lost, server shutting down), or the
        /// server reached takes no writes (SQLSTATE 25006: a standby, a demoted primary).
        case unavailable
        /// A value PostgreSQL refused that only caller input can hold (U+0000 in text).
        case invalidInput = "invalid_input"
        /// Any other failure of a statement (a constraint, a bug).
        case failed
    }

    package let code: Code
    /// The libpq function and SQLSTATE; safe to log, never a value, never shown to a caller.
    package let cause: String
    /// The statement was sent and its answer lost with the connection: it may have committed
    /// (``PostgresError/outcomeUnknown``).
    package let outcomeUnknown: Bool

    package init(_ error: PostgresError) {
        outcomeUnknown = error.outcomeUnknown
        if error.isConnectionFailure {
            code = .unavailable
        } else if error.code == .invalidParameter {
            code = .invalidInput
        } else {
            code = .failed
        }
        cause = error.description
    }

    package var description: String { "StoreError(\(code.rawValue)): \(cause)" }
}

extension RelayError {
    /// The one mapping of a store error to the caller's problem (behaviour §4, §5), row by row:
    ///
    /// | code | problem |
    /// |---|---|
    /// | `unavailable` | 503 `upstream_unavailable`, `Retry-After: 2` (`Database.retryAfterSeconds`) |
    /// | `invalid_input` | 400 `invalid_request`, `field: input` |
    /// | `failed` | 500 `internal`, the cause logged |
    package init(_ error: StoreError) {
        switch error.code {
        case .unavailable:
            self = RelayError.unavailable("The database is unavailable.", retryAfterSeconds: Database.retryAfterSeconds)
        case .invalidInput:
            // Only caller input can hold U+0000; the service never makes one.
            self = RelayError.invalidRequest(field: "input", "Text values may not contain NUL (U+0000) characters.")
            return
        case .failed:
            self.init(.internal, "A database operation failed.")
        }
        cause = error.cause
    }
}
