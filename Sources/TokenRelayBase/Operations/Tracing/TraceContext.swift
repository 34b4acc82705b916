import Foundation

/// The W3C Trace Context of one span (W3C Trace Context Level 1 §3): the trace id, this span's
/// id, the flags and the vendors' `tracestate`, as the `traceparent` and `tracestate` headers
/// carry them.
package struct TraceContext: Sendable, Equatable {
    /// The 16-byte trace id as two big-endian halves; never both zero.
    package var traceIdHigh: UInt64
    package var traceIdLow: UInt64
    /// The 8-byte span id; never zero.
    package var spanId: UInt64
    /// `trace-flags`; bit 0 is `sampled` (§3.2.2.5).
    package var flags: UInt8
    /// The caller's `tracestate`, passed on unchanged (§3.3), nil when it sent none or one that
    /// is not printable ASCII of at most ``maxTraceStateLength`` bytes.
    package var traceState: String?

    package init(traceIdHigh: UInt64, traceIdLow: UInt64, spanId: UInt64, flags: UInt8, traceState: String? = nil) {
        self.traceIdHigh = traceIdHigh
        self.traceIdLow = traceIdLow
        self.spanId = spanId
        self.flags = flags
        self.traceState = traceState
    }

    /// Whether the caller (or we, for a new trace) may record this trace (§3.2.2.5.1).
    package var sampled: Bool { flags & 1 == 1 }

    /// The same trace, a new span of it (its parent is this span).
    package func child() -> TraceContext {
        TraceContext(traceIdHigh: traceIdHigh, traceIdLow: traceIdLow, spanId: TraceIds.spanId(), flags: flags, traceState: traceState)
    }

    /// A new trace, sampled, with no parent.
    package static func newTrace() -> TraceContext {
        let (high, low) = TraceIds.traceId()
        return TraceContext(traceIdHigh: high, traceIdLow: low, spanId: TraceIds.spanId(), flags: 1)
    }

    /// The `traceparent` header naming this span as the parent: `00-{trace id}-{span id}-{flags}`.
    package var traceparent: String {
        "00-" + Hex.of(traceIdHigh) + Hex.of(traceIdLow) + "-" + Hex.of(spanId) + "-" + Hex.of(flags)
    }

    /// The trace id as 32 lower-case hex digits (OTLP/JSON `traceId`).
    package var traceIdHex: String { Hex.of(traceIdHigh) + Hex.of(traceIdLow) }

    /// Longest `tracestate` passed on: the length every vendor must propagate (§3.3.1.5).
    package static let maxTraceStateLength = 512

    /// The caller's span as a remote parent: `traceparent` when it is valid (§3.2: version 00 is
    /// exactly `00-` 32 hex `-` 16 hex `-` 2 hex; a later version may add `-` and more; `ff`, an
    /// all-zero trace id and an all-zero span id are invalid), with its `tracestate` (the fields of
    /// the header joined by `,`, §3.3.1.1). Nil when there is no valid `traceparent`: the request
    /// starts a new trace, and the `tracestate` goes with the invalid parent (§3.3.1.1).
    package static func remoteParent(traceparent: String?, tracestate: [String]) -> TraceContext? {
        guard let header = traceparent else { return nil }
        let bytes = Array(header.utf8)
        guard bytes.count >= 55, bytes.count == 55 || bytes[55] == UInt8(ascii: "-"),
            bytes[2] == UInt8(ascii: "-"), bytes[35] == UInt8(ascii: "-"), bytes[52] == UInt8(ascii: "-"),
            let version = Hex.parse(bytes[0..<2]), version != 0xFF, version != 0 || bytes.count == 55,
            let high = Hex.parse(bytes[3..<19]), let low = Hex.parse(bytes[19..<35]), high != 0 || low != 0,
            let span = Hex.parse(bytes[36..<52]), span != 0,
            let flags = Hex.parse(bytes[53..<55])
        else { return nil }
        let state = tracestate.isEmpty ? nil : tracestate.joined(separator: ",")
        let usable = state.flatMap { text in
            text.utf8.count <= maxTraceStateLength && text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) && !text.isEmpty ? text : nil
        }
        // Only the sampled bit is defined for version 00; other bits are not passed on (§3.2.2.5).
        return TraceContext(traceIdHigh: high, traceIdLow: low, spanId: span, flags: UInt8(flags & 1), traceState: usable)
    }
}

/// Random trace and span ids (W3C Trace Context §3.2.2.3–4: random, never all zero), from
/// OpenSSL's DRBG in batches (``RandomBytePool``).
package enum TraceIds {
    private static let randomness = RandomBytePool()

    package static func spanId() -> UInt64 {
        let (a, b) = randomness.next16()
        return a != 0 ? a : (b != 0 ? b : 1)
    }

    package static func traceId() -> (UInt64, UInt64) {
        let (a, b) = randomness.next16()
        return a == 0 && b == 0 ? (0, 1) : (a, b)
    }
}

/// Lower-case hex of ids, and its reading.
package enum Hex {
    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// `value` as 16 lower-case hex digits, most significant first.
    package static func of(_ value: UInt64) -> String {
        String(unsafeUninitializedCapacity: 16) { text in
            for index in 0..<16 { text[index] = digits[Int((value >> UInt64(60 - 4 * index)) & 0xF)] }
            return 16
        }
    }

    /// `value` as 2 lower-case hex digits.
    package static func of(_ value: UInt8) -> String {
        String(unsafeUninitializedCapacity: 2) { text in
            text[0] = digits[Int(value >> 4)]
            text[1] = digits[Int(value & 0xF)]
            return 2
        }
    }

    /// Up to 16 lower-case hex digits as a number; nil when one is not (W3C Trace Context §3.2:
    /// `traceparent` is lower-case hex, and an upper-case one is invalid, so a new trace starts).
    package static func parse(_ bytes: ArraySlice<UInt8>) -> UInt64? {
        var value: UInt64 = 0
        for byte in bytes {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            default: return nil
            }
            value = value << 4 | UInt64(digit)
        }
        return value
    }
}
