import Foundation
import Synchronization

/// Structured JSON logs, one line per event on standard error, with dotted keys
/// (`request.id`, `account.id`, `sts.error_codes`). Values under secret-looking keys are masked
/// before they are written, so a token, secret, code, assertion or API key never reaches a log
/// (behaviour §7); usernames only when `log_pii` is on.
public struct Logger: Sendable {
    package let level: LogLevel
    package let logPII: Bool
    package let sink: LogSink

    public init(level: LogLevel, logPII: Bool, sink: LogSink = .standardError) {
        self.level = level
        self.logPII = logPII
        self.sink = sink
    }

    public func debug(_ event: String, _ fields: [String: String] = [:]) { log(.debug, event, fields) }
    public func info(_ event: String, _ fields: [String: String] = [:]) { log(.info, event, fields) }
    public func warn(_ event: String, _ fields: [String: String] = [:]) { log(.warn, event, fields) }
    public func error(_ event: String, _ fields: [String: String] = [:]) { log(.error, event, fields) }

    public func log(_ severity: LogLevel, _ event: String, _ fields: [String: String]) {
        guard severity >= level else { return }
        var object: [String: String] = ["time": Self.timestamp(), "level": severity.rawValue, "event": event]
        for (key, value) in fields {
            object[key] = Self.redacted(key: key, value: value, logPII: logPII)
        }
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
        sink.write(String(decoding: data, as: UTF8.self))
    }

    private static let secretMarkers = ["token", "secret", "code", "assertion", "api_key", "apikey", "password", "authorization", "verifier", "key"]
    private static let piiMarkers = ["username", "login_hint", "upn", "email"]

    package static func redacted(key: String, value: String, logPII: Bool) -> String {
        let lower = key.lowercased()
        // Identifiers and counters that merely mention a secret's name are safe to show.
        let safeSuffixes = [".id", "_id", ".count", ".kind", ".status", "error_codes", "key_id", "key.id"]
        if !safeSuffixes.contains(where: { lower.hasSuffix($0) }) && secretMarkers.contains(where: { lower.contains($0) }) {
            return "[redacted]"
        }
        if !logPII && piiMarkers.contains(where: { lower.contains($0) }) {
            return "[pii]"
        }
        return value
    }

    private static func timestamp() -> String {
        Date().formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
    }
}

/// Where log lines go: standard error, a file (in-process tests: their log directory is scanned
/// for secrets), or memory (tests read what would have been written).
public final class LogSink: Sendable {
    private let capturing: Bool
    private let lines = Mutex<[String]>([])
    /// A file sink's file; nil: standard error. One `write(2)` per line.
    private let file: FileHandle?

    private init(capturing: Bool, file: FileHandle? = nil) {
        self.capturing = capturing
        self.file = file
    }

    public static let standardError = LogSink(capturing: false)

    public static func memory() -> LogSink { LogSink(capturing: true) }

    /// Appends lines to the file at `path`, created when missing.
    /// - Returns: the sink, or nil when the file cannot be opened.
    public static func file(_ path: String) -> LogSink? {
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        guard let handle = FileHandle(forWritingAtPath: path) else { return nil }
        _ = try? handle.seekToEnd()
        return LogSink(capturing: false, file: handle)
    }

    package func write(_ line: String) {
        if capturing {
            lines.withLock { $0.append(line) }
        } else {
            (file ?? FileHandle.standardError).write(Data((line + "\n").utf8))
        }
    }

    /// Lines captured by a memory sink.
    public var captured: [String] { lines.withLock { $0 } }
}
