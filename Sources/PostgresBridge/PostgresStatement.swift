import Glibc

/// One statement a ``PostgresConnection`` ran, as told to its observer
/// (``PostgresConnection/observingStatements(_:_:)``): what kind of statement and when, never its
/// text's values or its parameters.
public struct PostgresStatement: Sendable {
    /// The statement's operation (`SELECT`, `INSERT`, `UPDATE`, `DELETE`, `BEGIN`, `COMMIT`…): its
    /// first keyword, or for a `WITH` query the first keyword outside the common table
    /// expressions' parentheses; nil when the text starts with none.
    public let operation: String?
    /// Unix nanoseconds.
    public let startNanos: UInt64
    public let endNanos: UInt64
    /// How it failed: the SQLSTATE, or the bridge's code (`connection_failure`…); nil when it did not.
    public let errorType: String?

    init(sql: String, startNanos: UInt64, endNanos: UInt64, errorType: String?) {
        operation = Self.operation(of: sql)
        self.startNanos = startNanos
        self.endNanos = endNanos
        self.errorType = errorType
    }

    /// The operation keyword of `sql`, upper-cased; see ``operation``.
    public static func operation(of sql: String) -> String? {
        var words: [String] = []
        var depth = 0
        var word: [UInt8] = []
        var inQuote: UInt8? = nil
        func finishWord() -> String? {
            defer { word.removeAll(keepingCapacity: true) }
            guard !word.isEmpty, depth == 0 else { return nil }
            return String(decoding: word, as: UTF8.self).uppercased()
        }
        for byte in sql.utf8 {
            if let quote = inQuote {
                if byte == quote { inQuote = nil }
                continue
            }
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "_"):
                word.append(byte)
                continue
            default:
                break
            }
            if let finished = finishWord() {
                if words.isEmpty && finished != "WITH" { return finished }
                if !words.isEmpty, Self.withBodies.contains(finished) { return finished }
                words.append(finished)
            }
            switch byte {
            case UInt8(ascii: "("): depth += 1
            case UInt8(ascii: ")"): depth = max(0, depth - 1)
            case UInt8(ascii: "'"), UInt8(ascii: "\""): inQuote = byte
            default: break
            }
        }
        if let finished = finishWord() {
            if words.isEmpty || Self.withBodies.contains(finished) { return finished }
        }
        return words.isEmpty ? nil : words.first
    }

    /// The statements a `WITH` query's body may be.
    private static let withBodies: Set<String> = ["SELECT", "INSERT", "UPDATE", "DELETE", "MERGE", "VALUES"]

    static func nowNanos() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
