import Foundation
import Synchronization

/// One finished span, waiting in the ``Tracer``'s queue for export (OTLP `Span`).
package struct SpanRecord: Sendable {
    /// OTLP `SpanKind`: what the span measured.
    package enum Kind: Int, Sendable {
        case `internal` = 1
        /// A request this service answered.
        case server = 2
        /// A call this service made (a statement, the token endpoint, a downstream API).
        case client = 3
    }

    /// An attribute's value (OTLP `AnyValue`: string, int64 or bool here).
    package enum Value: Sendable, Equatable {
        case string(String)
        case int(Int)
        case bool(Bool)
    }

    package var name: String
    package var kind: Kind
    /// This span's ids, its flags and the trace's `tracestate`.
    package var context: TraceContext
    /// The parent span's id; 0 for a root span.
    package var parentSpanId: UInt64
    /// Unix nanoseconds.
    package var startNanos: UInt64
    package var endNanos: UInt64
    /// OpenTelemetry semantic-convention names; never a secret, a username or a raw path.
    package var attributes: [(String, Value)]
    /// OTLP `Status`: error when the span's operation failed (`error.type` says how).
    package var failed: Bool

    package init(
        name: String, kind: Kind, context: TraceContext, parentSpanId: UInt64, startNanos: UInt64, endNanos: UInt64,
        attributes: [(String, Value)], failed: Bool
    ) {
        self.name = name
        self.kind = kind
        self.context = context
        self.parentSpanId = parentSpanId
        self.startNanos = startNanos
        self.endNanos = endNanos
        self.attributes = attributes
        self.failed = failed
    }
}

/// Where finished spans wait for export (behaviour §8.11): a bounded queue that a request
/// appends to under a lock and never waits on. A span that finds it full is dropped and counted
/// (`tokenrelay_trace_spans_dropped_total`); the exporter (a service of the group) takes batches
/// from it. Nothing here performs I/O, so a span recorded while a PostgreSQL connection is held
/// holds it no longer.
package final class Tracer: Sendable {
    /// Spans held at most (`TOKENRELAY_OTLP_QUEUE_SPANS`).
    package let capacity: Int
    private let queue: Mutex<[SpanRecord]>
    private let dropped: Metrics.Counter
    /// Signalled when the queue holds a full batch, so the exporter need not wait for its interval.
    private let batchReady = Mutex<(@Sendable () -> Void)?>(nil)
    /// Spans the exporter takes per request.
    package let batchSize: Int

    package init(capacity: Int, batchSize: Int = 512, metrics: Metrics) {
        self.capacity = max(1, capacity)
        self.batchSize = max(1, min(batchSize, capacity))
        queue = Mutex([])
        dropped = metrics.counter("tokenrelay_trace_spans_dropped_total")
        metrics.describe(
            "tokenrelay_trace_spans_dropped_total", "counter", "Spans dropped because the export queue was full (TOKENRELAY_OTLP_QUEUE_SPANS).", series: [[:]])
        metrics.describe(
            "tokenrelay_trace_spans_exported_total", "counter", "Spans the OTLP receiver accepted (TOKENRELAY_OTLP_ENDPOINT).", series: [[:]])
        metrics.describe(
            "tokenrelay_trace_spans_failed_total", "counter", "Spans given up because their export failed (receiver unreachable or refused).",
            series: [[:]])
        metrics.describe("tokenrelay_trace_spans_queued", "gauge", "Spans waiting in the export queue.")
        metrics.addGauges { [weak self] in [("tokenrelay_trace_spans_queued", [:], Double(self?.count ?? 0))] }
    }

    /// Queues `span`, or drops and counts it when the queue is full. Never waits.
    package func record(_ span: SpanRecord) {
        let full = queue.withLock { queue -> Bool? in
            guard queue.count < capacity else { return nil }
            queue.append(span)
            return queue.count == batchSize
        }
        switch full {
        case nil: dropped.increment()
        case true?: batchReady.withLock { $0 }?()
        case false?: break
        }
    }

    /// Takes up to ``batchSize`` of the oldest spans.
    package func take() -> [SpanRecord] {
        queue.withLock { queue in
            let count = min(queue.count, batchSize)
            let batch = Array(queue.prefix(count))
            queue.removeFirst(count)
            return batch
        }
    }

    /// Spans waiting.
    package var count: Int { queue.withLock { $0.count } }

    /// Calls `wake` each time the queue reaches a full batch (the exporter's nudge).
    package func onBatchReady(_ wake: @escaping @Sendable () -> Void) {
        batchReady.withLock { $0 = wake }
    }

    /// Unix time in nanoseconds, for span start and end times (OTLP `fixed64 time_unix_nano`).
    package static func nowNanos() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}

/// The span a task works for: the request being answered, whose statements and upstream calls
/// become its children. Set for the suspended step of a request (``Tracing/current``).
package struct ActiveSpan: Sendable {
    /// This span's ids; its `traceparent` is what a child's parent id names.
    package let context: TraceContext
    /// Where this trace's spans go; nil when they are not recorded (no `TOKENRELAY_OTLP_ENDPOINT`,
    /// or the caller's `traceparent` is not sampled). The ids are propagated all the same.
    package let tracer: Tracer?

    package init(context: TraceContext, tracer: Tracer?) {
        self.context = context
        self.tracer = tracer
    }

    /// Starts a child span now: its ids (for the `traceparent` a call sends) and, when recorded,
    /// its start time.
    package func child(_ name: String, kind: SpanRecord.Kind) -> OpenSpan {
        OpenSpan(name: name, kind: kind, context: context.child(), parentSpanId: context.spanId, tracer: tracer)
    }
}

/// A span started and not yet ended: ``end(_:failed:)`` queues it (when recorded).
package struct OpenSpan: Sendable {
    package let name: String
    package let kind: SpanRecord.Kind
    /// The span's own ids: what a call sends as its `traceparent`.
    package let context: TraceContext
    package let parentSpanId: UInt64
    package let tracer: Tracer?
    package let startNanos: UInt64

    package init(name: String, kind: SpanRecord.Kind, context: TraceContext, parentSpanId: UInt64, tracer: Tracer?, startNanos: UInt64? = nil) {
        self.name = name
        self.kind = kind
        self.context = context
        self.parentSpanId = parentSpanId
        self.tracer = tracer
        self.startNanos = tracer == nil ? 0 : (startNanos ?? Tracer.nowNanos())
    }

    /// Whether ending the span queues it.
    package var isRecorded: Bool { tracer != nil }

    /// Ends the span now with `attributes`; `failed` sets its status to error.
    package func end(_ attributes: [(String, SpanRecord.Value)], failed: Bool = false, endNanos: UInt64? = nil) {
        guard let tracer else { return }
        tracer.record(
            SpanRecord(
                name: name, kind: kind, context: context, parentSpanId: parentSpanId, startNanos: startNanos, endNanos: endNanos ?? Tracer.nowNanos(),
                attributes: attributes, failed: failed))
    }
}

/// The task's current span (a task-local value): set by the HTTP pipeline around a request's
/// suspended step; the store's statements and the upstream calls read it. Work of no request
/// (background jobs) has none and makes no spans.
package enum Tracing {
    @TaskLocal package static var current: ActiveSpan?
}
