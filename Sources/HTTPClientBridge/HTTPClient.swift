import Synchronization

/// An HTTP/1.1 client on libcurl: keep-alive connections, many requests in flight, async API.
///
/// One dedicated thread owns a `curl_multi` handle and runs every transfer; `execute(_:)`
/// hands the request over and suspends until it finishes, so no task-pool thread ever blocks.
/// Redirects are not followed and bodies are not decompressed.
public final class HTTPClient: Sendable {
    private let worker: CurlWorker
    private let nextID = Atomic<UInt64>(0)
    /// Largest response body accepted, in bytes.
    public let maxResponseBytes: Int

    /// Starts the client's thread.
    ///
    /// - Parameter maxResponseBytes: Largest response body accepted, in bytes; larger ones fail
    ///   with `HTTPClientError.Kind.tooLarge`. Default 8 MiB.
    public init(maxResponseBytes: Int = 8 << 20) {
        precondition(CurlGlobal.initialized, "curl_global_init failed")
        self.maxResponseBytes = max(0, maxResponseBytes)
        worker = CurlWorker(maxResponseBytes: self.maxResponseBytes)
    }

    deinit { worker.stop() }

    /// Sends `request` and waits for the complete response.
    ///
    /// Any HTTP status, including 3xx/4xx/5xx, is a response, not an error.
    /// - Returns: Status, headers of the final response block, and body.
    /// - Throws: `HTTPClientError` when no response arrived (see `Kind` and `requestSent`);
    ///   `CancellationError` when the task is cancelled (the transfer is abandoned).
    public func execute(_ request: HTTPClientRequest) async throws -> HTTPClientResponse {
        try Task.checkCancellation()
        let id = nextID.add(1, ordering: .relaxed).newValue
        let worker = self.worker
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                if !worker.submit(CurlWorker.Job(id: id, request: request, continuation: continuation)) {
                    continuation.resume(throwing: HTTPClientError.shutDown)
                }
            }
        } onCancel: {
            worker.cancel(id)
        }
    }

    /// Fails queued and running requests with `HTTPClientError.Kind.other`, closes connections
    /// and ends the client's thread. Later `execute` calls fail at once. Idempotent.
    public func shutdown() {
        worker.stop()
    }
}
