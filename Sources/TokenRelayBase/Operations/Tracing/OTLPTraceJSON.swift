/// An `ExportTraceServiceRequest` in OTLP/JSON (OpenTelemetry Protocol "JSON Protobuf Encoding"):
/// the proto3 JSON mapping with lowerCamelCase keys, enums as integers, 64-bit integers as decimal
/// strings, and, unlike proto3 JSON, `traceId`/`spanId`/`parentSpanId` as lower-case hex rather
/// than base64. One resource (`service.name`, `service.version`), one scope.
///
/// Written byte by byte (strings escaped by ``JSONWriter``): a `JSONValue` tree per span cost
/// about 65,000 instructions, as much as the whole cached answer it described.
package enum OTLPTraceJSON {
    /// The instrumentation scope's name.
    package static let scopeName = "token-relay"

    /// The request body for `spans`.
    /// - Parameters:
    ///   - serviceName: the `service.name` resource attribute (`TOKENRELAY_OTLP_SERVICE_NAME`).
    ///   - serviceVersion: `service.version`.
    package static func encode(_ spans: [SpanRecord], serviceName: String, serviceVersion: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256 + spans.count * 512)
        out += #"{"resourceSpans":[{"resource":{"attributes":["#.utf8
        attribute("service.name", .string(serviceName), into: &out)
        out.append(UInt8(ascii: ","))
        attribute("service.version", .string(serviceVersion), into: &out)
        out += #"]},"scopeSpans":[{"scope":{"name":"#.utf8
        JSONWriter.writeString(scopeName, into: &out)
        out += #","version":"#.utf8
        JSONWriter.writeString(serviceVersion, into: &out)
        out += #"},"spans":["#.utf8
        for (index, span) in spans.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            write(span, into: &out)
        }
        out += "]}]}]}".utf8
        return out
    }

    private static func write(_ span: SpanRecord, into out: inout [UInt8]) {
        out += #"{"traceId":""#.utf8
        hex(span.context.traceIdHigh, into: &out)
        hex(span.context.traceIdLow, into: &out)
        out += #"","spanId":""#.utf8
        hex(span.context.spanId, into: &out)
        out.append(UInt8(ascii: "\""))
        if span.parentSpanId != 0 {
            out += #","parentSpanId":""#.utf8
            hex(span.parentSpanId, into: &out)
            out.append(UInt8(ascii: "\""))
        }
        if let state = span.context.traceState {
            out += #","traceState":"#.utf8
            JSONWriter.writeString(state, into: &out)
        }
        out += #","name":"#.utf8
        JSONWriter.writeString(span.name, into: &out)
        out += #","kind":"#.utf8
        decimal(UInt64(span.kind.rawValue), into: &out)
        out += #","startTimeUnixNano":""#.utf8
        decimal(span.startNanos, into: &out)
        out += #"","endTimeUnixNano":""#.utf8
        decimal(max(span.startNanos, span.endNanos), into: &out)
        out += #"","attributes":["#.utf8
        for (index, (key, value)) in span.attributes.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            attribute(key, value, into: &out)
        }
        // Span.flags: the W3C trace flags in bits 0–7.
        out += #"],"flags":"#.utf8
        decimal(UInt64(span.context.flags), into: &out)
        // STATUS_CODE_ERROR is 2; a span that did not fail leaves its status unset (0).
        out += span.failed ? #","status":{"code":2}}"#.utf8 : #","status":{}}"#.utf8
    }

    private static func attribute(_ key: String, _ value: SpanRecord.Value, into out: inout [UInt8]) {
        out += #"{"key":"#.utf8
        JSONWriter.writeString(key, into: &out)
        switch value {
        case .string(let text):
            out += #","value":{"stringValue":"#.utf8
            JSONWriter.writeString(text, into: &out)
        case .int(let number):
            out += #","value":{"intValue":""#.utf8
            if number < 0 { out.append(UInt8(ascii: "-")) }
            decimal(UInt64(number.magnitude), into: &out)
            out.append(UInt8(ascii: "\""))
        case .bool(let flag):
            out += #","value":{"boolValue":"#.utf8
            out += flag ? "true".utf8 : "false".utf8
        }
        out += "}}".utf8
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// 16 lower-case hex digits.
    private static func hex(_ value: UInt64, into out: inout [UInt8]) {
        for shift in stride(from: 60, through: 0, by: -4) { out.append(hexDigits[Int((value >> UInt64(shift)) & 0xF)]) }
    }

    private static func decimal(_ value: UInt64, into out: inout [UInt8]) {
        var divisor: UInt64 = 1
        while value / divisor >= 10 { divisor *= 10 }
        while divisor > 0 {
            out.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
            divisor /= 10
        }
    }
}
