import Foundation

extension Logger {
    /// The answer to one request, as logged by ``access(_:)``.
    package struct AccessRecord: Sendable {
        package var method: String
        /// The route template (`/v1/accounts/{account_id}`), never the raw path; `unmatched`.
        package var route: String
        package var status: Int
        package var seconds: Double
        /// The API key id of the caller (the bootstrap key's too, §7.1); nil on open routes
        /// and before the key was known.
        package var keyId: String?
        package var correlationId: String
        /// A well-formed W3C `traceparent`, else nil.
        package var traceParent: String?
        /// `server_thread` or `suspended` (ADR 0013).
        package var step: String

        package init(
            method: String, route: String, status: Int, seconds: Double, keyId: String? = nil, correlationId: String, traceParent: String? = nil, step: String
        ) {
            self.method = method
            self.route = route
            self.status = status
            self.seconds = seconds
            self.keyId = keyId
            self.correlationId = correlationId
            self.traceParent = traceParent
            self.step = step
        }
    }

    /// Whether ``access(_:)`` writes anything (level `info` or `debug`).
    package var logsAccess: Bool { level <= .info }

    /// One `request.completed` line per answer at `info` (behaviour §8.3): method, route template,
    /// status, duration, API key id, correlation id, `traceparent`, step. Nothing else of the
    /// request is in it (no path, query, header or body: no secret, no personal data). Built by
    /// hand rather than through `JSONSerialization` and `Date.formatted`: it is written on every
    /// answer, cached token answers included (behaviour §10); the same JSON, keys sorted.
    package func access(_ record: AccessRecord) {
        guard logsAccess else { return }
        var line = "{"
        line.reserveCapacity(320)
        if let keyId = record.keyId { Self.member(&line, "api_key.id", keyId) }
        Self.member(&line, "correlation.id", record.correlationId)
        let hundredths = Int((max(0, record.seconds) * 100_000).rounded())
        let fraction = hundredths % 100
        Self.member(&line, "duration_ms", "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)")
        Self.member(&line, "event", "request.completed")
        Self.member(&line, "level", LogLevel.info.rawValue)
        Self.member(&line, "request.method", record.method)
        Self.member(&line, "request.route", record.route)
        Self.member(&line, "request.step", record.step)
        Self.member(&line, "response.status", String(record.status))
        Self.member(&line, "time", Self.fastTimestamp())
        if let traceParent = record.traceParent { Self.member(&line, "trace.parent", traceParent) }
        line += "}"
        sink.write(line)
    }

    /// Appends `"name":"value"` (a comma before all but the first), the value escaped as JSON.
    private static func member(_ line: inout String, _ name: String, _ value: String) {
        if line.utf8.count > 1 { line += "," }
        line += "\""
        line += name
        line += "\":\""
        if value.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            for scalar in value.unicodeScalars {
                switch scalar {
                case "\"": line += "\\\""
                case "\\": line += "\\\\"
                case "\n": line += "\\n"
                case "\r": line += "\\r"
                case "\t": line += "\\t"
                case _ where scalar.value < 0x20: line += String(format: "\\u%04x", scalar.value)
                default: line.unicodeScalars.append(scalar)
                }
            }
        } else {
            line += value
        }
        line += "\""
    }

    /// Now as `2026-01-02T03:04:05.678Z` (UTC, milliseconds), what ``log(_:_:_:)`` writes.
    package static func fastTimestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return digits.utf8.count >= width ? digits : String(repeating: "0", count: width - digits.utf8.count) + digits
        }
        let milliseconds = Int32(now.tv_nsec / 1_000_000)
        return pad(parts.tm_year + 1900, 4) + "-" + pad(parts.tm_mon + 1, 2) + "-" + pad(parts.tm_mday, 2) + "T" + pad(parts.tm_hour, 2) + ":"
            + pad(parts.tm_min, 2) + ":" + pad(parts.tm_sec, 2) + "." + pad(milliseconds, 3) + "Z"
    }
}
