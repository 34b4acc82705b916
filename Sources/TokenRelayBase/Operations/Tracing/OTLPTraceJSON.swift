import IdentityCore

/// An `ExportTraceServiceRequest` in OTLP/JSON (OpenTelemetry Protocol "JSON Protobuf Encoding"):
/// the proto3 JSON mapping with lowerCamelCase keys, enums as integers, 64-bit integers as decimal
/// strings, and, unlike proto3 JSON, `traceId`/`spanId`/`parentSpanId` as lower-case hex rather
/// than base64. One resource (`service.name`, `service.version`), one scope.
package enum OTLPTraceJSON {
    /// The instrumentation scope's name.
    package static let scopeName = "token-relay"

    /// The request body for `spans`.
    /// - Parameters:
    ///   - serviceName: the `service.name` resource attribute (`TOKENRELAY_OTLP_SERVICE_NAME`).
    ///   - serviceVersion: `service.version`.
    package static func encode(_ spans: [SpanRecord], serviceName: String, serviceVersion: String) -> [UInt8] {
        let resource: JSONValue = .object([
            "attributes": .array([attribute("service.name", .string(serviceName)), attribute("service.version", .string(serviceVersion))])
        ])
        let scope: JSONValue = .object(["name": .string(scopeName), "version": .string(serviceVersion)])
        let body: JSONValue = .object([
            "resourceSpans": .array([
                .object(["resource": resource, "scopeSpans": .array([.object(["scope": scope, "spans": .array(spans.map(span))])])])
            ])
        ])
        return JSONWriter.encode(body)
    }

    private static func span(_ span: SpanRecord) -> JSONValue {
        var members: [String: JSONValue] = [
            "traceId": .string(span.context.traceIdHex),
            "spanId": .string(Hex.of(span.context.spanId)),
            "name": .string(span.name),
            "kind": .number(Double(span.kind.rawValue)),
            "startTimeUnixNano": .string(String(span.startNanos)),
            "endTimeUnixNano": .string(String(max(span.startNanos, span.endNanos))),
            "attributes": .array(span.attributes.map { attribute($0.0, $0.1) }),
            // The W3C trace flags (bits 0–7) of the span (Span.flags).
            "flags": .number(Double(span.context.flags)),
            // STATUS_CODE_ERROR is 2; a span that did not fail leaves its status unset (0).
            "status": .object(span.failed ? ["code": .number(2)] : [:]),
        ]
        if span.parentSpanId != 0 { members["parentSpanId"] = .string(Hex.of(span.parentSpanId)) }
        if let state = span.context.traceState { members["traceState"] = .string(state) }
        return .object(members)
    }

    private static func attribute(_ key: String, _ value: SpanRecord.Value) -> JSONValue {
        let encoded: JSONValue =
            switch value {
            case .string(let text): .object(["stringValue": .string(text)])
            case .int(let number): .object(["intValue": .string(String(number))])
            case .bool(let flag): .object(["boolValue": .bool(flag)])
            }
        return .object(["key": .string(key), "value": encoded])
    }
}
