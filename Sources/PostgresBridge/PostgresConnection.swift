internal import CPostgres
import Glibc

/// One libpq connection. Every call blocks its thread until the server answers.
///
/// Not Sendable: a connection is used only on its pool worker thread (see ``PostgresPool``);
/// don't keep it beyond the `withConnection` body that received it.
public final class PostgresConnection {
    private let url: String
    /// libpq connection keywords set before the URL's own (the URL may override them).
    private let defaults: [(String, String)]
    /// The libpq connection, nil before the first connect and after a failed one.
    private var handle: OpaquePointer?
    /// Set when a statement failed with a connection error, or left the protocol in a state this
    /// bridge cannot continue from: the next use reconnects.
    private var needsReset = false
    /// Told of each statement while ``observingStatements(_:_:)`` runs (a trace's statement spans).
    private var statementObserver: ((PostgresStatement) -> Void)?

    /// Creates an unconnected connection; the first use (or ``connectIfNeeded()``) connects.
    /// - Parameter url: a libpq conninfo string or `postgresql://` URL.
    init(url: String, defaults: [(String, String)] = []) {
        self.url = url
        self.defaults = defaults
    }

    deinit {
        if let handle { PQfinish(handle) }
    }

    // MARK: Statements

    /// Runs one statement with bound parameters (`$1`, `$2`, …) and returns its rows in text format.
    ///
    /// Uses `PQexecParams` (one statement only; the unnamed prepared statement, so it also works
    /// through pgbouncer in transaction mode). See ``PostgresParameter`` for how each kind is sent.
    /// - Parameters:
    ///   - sql: one SQL statement.
    ///   - parameters: values for `$1`…`$n`, in order.
    /// - Returns: the rows, affected-row count and column names.
    /// - Throws: ``PostgresError``; `isConnectionFailure` when the server is unreachable or the
    ///   connection was lost.
    @discardableResult
    public func query(_ sql: String, _ parameters: [PostgresParameter] = []) throws -> PostgresResult {
        // On the text's contiguous bytes where it has them: walking the UTF-8 view byte by byte
        // was 20k instructions of a forced refresh's two statements (behaviour §10).
        for case .text(let text) in parameters where text.utf8.withContiguousStorageIfAvailable({ $0.contains(0) }) ?? text.utf8.contains(0) {
            // libpq reads text parameters up to the first NUL: the value would be cut silently.
            throw PostgresError(code: .invalidParameter, function: "PQexecParams")
        }
        let handle = try connectIfNeeded()
        // Each value copied once, straight from its text or bytes (a `[UInt8]` made of each first,
        // twice, was a third of a forced refresh's two statements on our side, behaviour §10).
        let encoded = parameters.map(Self.copyToCString)
        defer { for value in encoded { value?.pointer.deallocate() } }
        let values = encoded.map { $0.map { UnsafePointer($0.pointer) } }
        let lengths = encoded.map { Int32(clamping: $0?.count ?? 0) }
        let types = parameters.map(\.typeOID)
        let formats = parameters.map(\.format)
        let textResults: Int32 = 0
        return try observed(sql) {
            let result = PQexecParams(
                handle, sql, Int32(parameters.count), types, values, lengths, formats, textResults)
            return try consume(result, function: "PQexecParams")
        }
    }

    /// Runs `body`, telling `observer` of every statement this connection runs meanwhile (on this
    /// thread, after the statement ended: the observer must not block). What it is told is the
    /// statement's operation and times, never its parameters (``PostgresStatement``).
    public func observingStatements<T>(_ observer: @escaping (PostgresStatement) -> Void, _ body: () throws -> T) rethrows -> T {
        let previous = statementObserver
        statementObserver = observer
        defer { statementObserver = previous }
        return try body()
    }

    /// `run`, timed and told to the observer when there is one.
    private func observed<T>(_ sql: String, _ run: () throws -> T) throws -> T {
        guard let observer = statementObserver else { return try run() }
        let start = PostgresStatement.nowNanos()
        do {
            let value = try run()
            observer(PostgresStatement(sql: sql, startNanos: start, endNanos: PostgresStatement.nowNanos(), errorType: nil))
            return value
        } catch let error as PostgresError {
            observer(
                PostgresStatement(sql: sql, startNanos: start, endNanos: PostgresStatement.nowNanos(), errorType: error.sqlState ?? error.code.description))
            throw error
        }
    }

    /// Runs one or more statements separated by `;` without parameters (migrations, `BEGIN`).
    ///
    /// Uses `PQexec`: the statements run as one implicit transaction unless they contain explicit
    /// transaction control.
    /// - Parameter sql: SQL text, possibly several statements.
    /// - Throws: ``PostgresError``.
    public func execute(_ sql: String) throws {
        _ = try commandStatus(sql)
    }

    /// Runs `body` inside `BEGIN` … `COMMIT`; on a throw from `body` it rolls back and rethrows.
    ///
    /// - Parameter body: the work; it receives this connection.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws; ``PostgresError`` for BEGIN/COMMIT failures, with code
    ///   `transactionRolledBack` when COMMIT turned into ROLLBACK because a statement inside failed
    ///   and `body` caught that error.
    @discardableResult
    public func transaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        try execute("BEGIN")
        let value: T
        do {
            value = try body(self)
        } catch {
            // Not on a connection marked for reset (lost, or on a read-only server): ROLLBACK would
            // reconnect first, possibly waiting out connect_timeout during a failover, only to
            // roll back nothing on a new session. The server ends the old one's transaction.
            if let handle, !needsReset, PQstatus(handle) == CONNECTION_OK {
                // A failed ROLLBACK leaves the connection marked for reset; the body's error matters.
                _ = try? commandStatus("ROLLBACK")
            }
            throw error
        }
        if try commandStatus("COMMIT") == "ROLLBACK" {
            throw PostgresError(code: .transactionRolledBack, function: "PQexec")
        }
        return value
    }

    // MARK: Connection state

    /// Makes the connection usable before a pool job: connects when never connected, reconnects
    /// when broken, and rolls back a transaction a previous job left open.
    ///
    /// An idle connection whose socket is readable was closed or told something by the server
    /// (e.g. `pg_terminate_backend`, a server restart): it is replaced rather than failing the
    /// next statement.
    /// - Throws: ``PostgresError`` with `isConnectionFailure` when connecting fails.
    func prepareForUse() throws {
        guard let handle, !needsReset, PQstatus(handle) == CONNECTION_OK else {
            try reconnect()
            return
        }
        switch PQtransactionStatus(handle) {
        case PQTRANS_IDLE:
            if Self.hasPendingInput(socket: PQsocket(handle)) { try reconnect() }
        case PQTRANS_INTRANS, PQTRANS_INERROR:
            do { _ = try commandStatus("ROLLBACK") } catch { try reconnect() }
        default:
            try reconnect()
        }
    }

    /// Returns the live libpq handle, connecting first when there is none or it is broken.
    @discardableResult
    func connectIfNeeded() throws -> OpaquePointer {
        if let handle, !needsReset, PQstatus(handle) == CONNECTION_OK { return handle }
        return try reconnect()
    }

    @discardableResult
    private func reconnect() throws -> OpaquePointer {
        if let old = handle {
            handle = nil
            PQfinish(old)
        }
        needsReset = false
        // Entries before `dbname` are defaults the URL may override (libpq docs, PQconnectdbParams:
        // "array entries appearing before an expanded dbname entry can be overridden").
        let options: [(String, String)] =
            [("connect_timeout", "5"), ("fallback_application_name", "tokenrelay")] + defaults + [("dbname", url)]
        let keywords = options.map { strdup($0.0) }
        let values = options.map { strdup($0.1) }
        defer {
            for pointer in keywords + values { free(pointer) }
        }
        let keywordList: [UnsafePointer<CChar>?] = keywords.map { $0.map { UnsafePointer($0) } } + [nil]
        let valueList: [UnsafePointer<CChar>?] = values.map { $0.map { UnsafePointer($0) } } + [nil]
        let expandDatabaseName: Int32 = 1
        guard let connection = PQconnectdbParams(keywordList, valueList, expandDatabaseName) else {
            throw PostgresError(code: .connectionFailure, function: "PQconnectdbParams", serverMessage: "out of memory")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.message(PQerrorMessage(connection))
            PQfinish(connection)
            throw PostgresError(code: .connectionFailure, function: "PQconnectdbParams", serverMessage: message)
        }
        // Server notices (e.g. "relation already exists, skipping") must not reach stderr.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        handle = connection
        return connection
    }

    // MARK: Notifications (LISTEN)

    /// Waits up to `timeoutMilliseconds` for the socket to become readable, then reads what the
    /// server sent and returns the notifications received (`LISTEN`/`NOTIFY`), oldest first.
    ///
    /// Uses `poll` on `PQsocket`, `PQconsumeInput` and `PQnotifies` (libpq docs, "Asynchronous
    /// Notification"): nothing is sent, so an idle listening connection costs the server nothing.
    /// - Parameter timeoutMilliseconds: longest wait; 0 only checks.
    /// - Returns: (channel, payload) pairs; empty when nothing arrived.
    /// - Throws: ``PostgresError`` `connectionFailure` (`PQconsumeInput`) when the connection was
    ///   lost or closed by the server: the next use reconnects, and notifications sent meanwhile
    ///   are gone.
    func waitForNotifications(timeoutMilliseconds: Int32) throws -> [(channel: String, payload: String)] {
        let handle = try connectIfNeeded()
        var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, timeoutMilliseconds)
        if ready < 0 && errno != EINTR {
            needsReset = true
            throw PostgresError(code: .connectionFailure, function: "poll")
        }
        if ready > 0 {
            guard PQconsumeInput(handle) == 1, PQstatus(handle) == CONNECTION_OK else {
                needsReset = true
                throw PostgresError(code: .connectionFailure, function: "PQconsumeInput", serverMessage: Self.message(PQerrorMessage(handle)))
            }
        }
        var received: [(channel: String, payload: String)] = []
        while let notification = PQnotifies(handle) {
            let item = notification.pointee
            received.append((item.relname.map { String(cString: $0) } ?? "", item.extra.map { String(cString: $0) } ?? ""))
            PQfreemem(notification)
        }
        return received
    }

    // MARK: Results

    /// Runs `sql` with `PQexec` and returns the command tag (`COMMIT`, `ROLLBACK`, `INSERT 0 1`…).
    private func commandStatus(_ sql: String) throws -> String {
        let handle = try connectIfNeeded()
        return try observed(sql) {
            let result = PQexec(handle, sql)
            var tag = ""
            _ = try consume(result, function: "PQexec") { tag = Self.message(PQcmdStatus($0)) ?? "" }
            return tag
        }
    }

    /// The one place that turns a libpq result into rows or a ``PostgresError``; clears `result`.
    private func consume(
        _ result: OpaquePointer?, function: String, inspect: (OpaquePointer) -> Void = { _ in }
    ) throws -> PostgresResult {
        guard let result else {
            // libpq returns no result when it could not send the command or ran out of memory.
            needsReset = true
            throw PostgresError(
                code: .connectionFailure, function: function,
                serverMessage: handle.flatMap { Self.message(PQerrorMessage($0)) })
        }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            inspect(result)
            return Self.rows(of: result)
        case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR, PGRES_BAD_RESPONSE:
            throw error(from: result, function: function)
        default:
            // COPY and pipeline states: this bridge cannot continue the protocol from here.
            needsReset = true
            throw PostgresError(code: .unexpectedResult, function: function)
        }
    }

    private func error(from result: OpaquePointer, function: String) -> PostgresError {
        // PG_DIAG_SQLSTATE is 'C' and PG_DIAG_MESSAGE_PRIMARY 'M' (postgres_ext.h); Swift does
        // not import character-literal macros.
        let sqlState = Self.message(PQresultErrorField(result, Int32(UInt8(ascii: "C"))))
        let primary = Self.message(PQresultErrorField(result, Int32(UInt8(ascii: "M"))))
        let message = primary ?? Self.message(PQresultErrorMessage(result))
        let connectionLost = handle.map { PQstatus($0) != CONNECTION_OK } ?? true
        // No SQLSTATE means libpq itself failed (lost socket, protocol error), not the statement.
        let isConnection = connectionLost || sqlState.map(PostgresError.isConnectionState) ?? true
        if isConnection { needsReset = true }
        return PostgresError(
            code: isConnection ? .connectionFailure : .queryFailed, function: function,
            sqlState: sqlState, serverMessage: message)
    }

    private static func rows(of result: OpaquePointer) -> PostgresResult {
        let fieldCount = Int(PQnfields(result))
        let rowCount = Int(PQntuples(result))
        let names = (0..<fieldCount).map { message(PQfname(result, Int32($0))) ?? "" }
        let columns = PostgresRow.Columns(names: names)
        var rows: [PostgresRow] = []
        rows.reserveCapacity(rowCount)
        for row in 0..<Int32(rowCount) {
            var values: [String?] = []
            values.reserveCapacity(fieldCount)
            for field in 0..<Int32(fieldCount) {
                if PQgetisnull(result, row, field) != 0 {
                    values.append(nil)
                } else {
                    let length = Int(PQgetlength(result, row, field))
                    let raw = UnsafeRawPointer(PQgetvalue(result, row, field)!)
                    let bytes = UnsafeBufferPointer(start: raw.assumingMemoryBound(to: UInt8.self), count: length)
                    values.append(String(decoding: bytes, as: UTF8.self))
                }
            }
            rows.append(PostgresRow(columns: columns, values: values))
        }
        let affected = message(PQcmdTuples(result)).flatMap { Int($0) } ?? 0
        return PostgresResult(rows: rows, affectedRows: affected, columns: names)
    }

    // MARK: Helpers

    /// A C string as Swift text without the trailing newline libpq adds; nil for NULL or empty.
    private static func message(_ pointer: UnsafePointer<CChar>?) -> String? {
        guard let pointer else { return nil }
        let text = String(cString: pointer).trimmingTrailingNewlines()
        return text.isEmpty ? nil : text
    }

    private static func message(_ pointer: UnsafeMutablePointer<CChar>?) -> String? {
        message(pointer.map { UnsafePointer($0) })
    }

    /// A NUL-terminated heap copy of `parameter`'s wire value (text as UTF-8, bytes as they are,
    /// an integer in decimal, a Boolean `t`/`f`) and its length without the NUL (text parameters
    /// need the NUL; binary ones their length); nil for SQL NULL.
    private static func copyToCString(_ parameter: PostgresParameter) -> (pointer: UnsafeMutablePointer<CChar>, count: Int)? {
        switch parameter {
        case .text(let value):
            return value.utf8.withContiguousStorageIfAvailable { copyToCString(UnsafeRawBufferPointer($0)) } ?? copyToCString(Array(value.utf8))
        case .bytes(let value): return copyToCString(value)
        case .int(let value): return copyToCString(Array(String(value).utf8))
        case .bool(let value): return copyToCString(value ? [UInt8(ascii: "t")] : [UInt8(ascii: "f")])
        case .null: return nil
        }
    }

    private static func copyToCString(_ bytes: [UInt8]) -> (pointer: UnsafeMutablePointer<CChar>, count: Int) {
        bytes.withUnsafeBytes { copyToCString($0) }
    }

    private static func copyToCString(_ bytes: UnsafeRawBufferPointer) -> (pointer: UnsafeMutablePointer<CChar>, count: Int) {
        let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count + 1)
        if let source = bytes.baseAddress { UnsafeMutableRawPointer(pointer).copyMemory(from: source, byteCount: bytes.count) }
        pointer[bytes.count] = 0
        return (pointer, bytes.count)
    }

    /// True when `socket` has data or EOF waiting (checked without blocking).
    private static func hasPendingInput(socket: Int32) -> Bool {
        guard socket >= 0 else { return true }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) != 0
    }
}

@available(*, unavailable, message: "a PostgresConnection belongs to one pool worker thread")
extension PostgresConnection: Sendable {}

extension String {
    fileprivate func trimmingTrailingNewlines() -> String {
        // Text ending in a visible ASCII character (every column name) has nothing to trim: no
        // `Character` walk (10 names of a forced refresh's two results cost 8k instructions, behaviour §10).
        if let last = utf8.last, last > 0x20, last < 0x7F { return self }
        var text = Substring(self)
        while let last = text.last, last.isNewline || last == " " { text = text.dropLast() }
        return String(text)
    }
}
