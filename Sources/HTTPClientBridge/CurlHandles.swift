internal import CCurl

/// Owns a libcurl easy handle. Touched only by `CurlWorker`'s thread.
final class EasyHandle {
    let pointer: UnsafeMutableRawPointer

    init() throws(HTTPClientError) {
        guard let handle = curl_easy_init() else {
            throw HTTPClientError(kind: .other, requestSent: false, function: "curl_easy_init", reason: "returned NULL")
        }
        pointer = handle
    }

    deinit { curl_easy_cleanup(pointer) }
}

/// Owns a libcurl multi handle (and through it the connection cache).
///
/// A multi handle belongs to one thread: only `CurlWorker`'s thread calls into it, except for
/// `curl_multi_wakeup`, which libcurl documents as callable from any thread.
final class MultiHandle: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer

    init() {
        guard let handle = curl_multi_init() else { fatalError("curl_multi_init returned NULL (out of memory)") }
        pointer = handle
        // libcurl's default cache is 4 × the handles added at the moment, so it shrinks whenever
        // traffic dips and keep-alive connections get closed and reopened (71 connections for 16
        // in flight, measured). A fixed size keeps them.
        _ = ccurl_multi_setopt_long(handle, CURLMOPT_MAXCONNECTS, Self.idleConnectionLimit)
    }

    /// Idle connections kept open for reuse, across all hosts.
    static let idleConnectionLimit = 128

    deinit { curl_multi_cleanup(pointer) }

    func wakeUp() { _ = curl_multi_wakeup(pointer) }
}

/// `curl_global_init` must run once before any other libcurl call; a lazily initialised static
/// `let` runs it exactly once, thread-safely.
enum CurlGlobal {
    static let initialized: Bool = ccurl_global_init_default() == CURLE_OK
}
