internal import CCurl
import HTTPCommon

/// One request in flight: its easy handle's configuration, the response being collected, and the
/// continuation to resume. Lives on `CurlWorker`'s thread only.
final class CurlTransfer {
    let id: UInt64
    let easy: EasyHandle
    private let continuation: CheckedContinuation<HTTPClientResponse, any Error>
    private let maxResponseBytes: Int
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var responseHeaders = HTTPHeaders()
    private var body: [UInt8] = []
    private var exceededLimit = false

    init(id: UInt64, easy: EasyHandle, continuation: CheckedContinuation<HTTPClientResponse, any Error>, maxResponseBytes: Int) {
        self.id = id
        self.easy = easy
        self.continuation = continuation
        self.maxResponseBytes = maxResponseBytes
    }

    deinit { curl_slist_free_all(headerList) }

    /// Sets every option for `request` on the easy handle.
    ///
    /// The callbacks get this object unretained as their context: the worker's table of active
    /// transfers keeps it alive until the handle leaves the multi handle.
    func configure(_ request: HTTPClientRequest) throws(HTTPClientError) {
        let handle = easy.pointer
        let context = Unmanaged.passUnretained(self).toOpaque()
        try check(ccurl_easy_setopt_string(handle, CURLOPT_URL, request.url))
        try check(ccurl_easy_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"))
        // Signals are process-wide; timeouts must not use SIGALRM on a multithreaded server.
        try check(ccurl_easy_setopt_long(handle, CURLOPT_NOSIGNAL, 1))
        // The sign-in flow must see 302s itself.
        try check(ccurl_easy_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0))
        let timeoutMilliseconds = max(1, Int((request.timeout * 1000).rounded(.up).clamped(to: 1...Double(Int32.max))))
        try check(ccurl_easy_setopt_long(handle, CURLOPT_TIMEOUT_MS, timeoutMilliseconds))
        // Lets libcurl refuse early when Content-Length announces too much.
        try check(ccurl_easy_setopt_off_t(handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(maxResponseBytes)))
        try check(ccurl_easy_setopt_write_callback(handle, CURLOPT_WRITEFUNCTION, curlWriteCallback))
        try check(ccurl_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, context))
        try check(ccurl_easy_setopt_write_callback(handle, CURLOPT_HEADERFUNCTION, curlHeaderCallback))
        try check(ccurl_easy_setopt_pointer(handle, CURLOPT_HEADERDATA, context))
        try configureMethodAndBody(request)
        try configureHeaders(request.headers)
    }

    private func configureMethodAndBody(_ request: HTTPClientRequest) throws(HTTPClientError) {
        let handle = easy.pointer
        let method = request.method
        guard !method.isEmpty, method.utf8.allSatisfy({ $0 > 32 && $0 < 127 }) else {
            throw HTTPClientError(kind: .other, requestSent: false, function: "HTTPClient.execute", reason: "invalid method")
        }
        if let body = request.body ?? (method == "POST" ? [] : nil) {
            // POSTFIELDSIZE first, so COPYPOSTFIELDS copies exactly that many bytes (NULs included).
            try check(ccurl_easy_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)))
            var storage = body
            if storage.isEmpty { storage = [0] }  // a valid pointer; size 0 is what counts
            let code = storage.withUnsafeMutableBytes { bytes in
                ccurl_easy_setopt_pointer(handle, CURLOPT_COPYPOSTFIELDS, bytes.baseAddress)
            }
            try check(code)
            if method != "POST" { try check(ccurl_easy_setopt_string(handle, CURLOPT_CUSTOMREQUEST, method)) }
        } else if method == "GET" {
            try check(ccurl_easy_setopt_long(handle, CURLOPT_HTTPGET, 1))
        } else if method == "HEAD" {
            try check(ccurl_easy_setopt_long(handle, CURLOPT_NOBODY, 1))
        } else {
            try check(ccurl_easy_setopt_string(handle, CURLOPT_CUSTOMREQUEST, method))
        }
    }

    private func configureHeaders(_ headers: HTTPHeaders) throws(HTTPClientError) {
        // Each line written from the field's own bytes: a `String` of its name, of its value and
        // of the line for each of a forced refresh's five fields cost 15k instructions (behaviour §10).
        var line: [UInt8] = []
        var refused = false
        var appended = true
        _ = headers.withEachField { name, value in
            guard !name.isEmpty, !name.contains(where: { $0 == 13 || $0 == 10 || $0 == UInt8(ascii: ":") }),
                !value.contains(where: { $0 == 13 || $0 == 10 })
            else {
                refused = true
                return false
            }
            // "Name;" is libcurl's spelling for a header with an empty value ("Name:" removes it).
            line.removeAll(keepingCapacity: true)
            line.reserveCapacity(name.count + value.count + 3)
            line.append(contentsOf: name)
            if value.isEmpty {
                line.append(UInt8(ascii: ";"))
            } else {
                line.append(UInt8(ascii: ":"))
                line.append(UInt8(ascii: " "))
                line.append(contentsOf: value)
            }
            line.append(0)
            appended = append(line)
            return appended
        }
        if refused {
            throw HTTPClientError(
                kind: .other, requestSent: false, function: "HTTPClient.execute", reason: "a header name or value contains CR, LF or a colon in the name")
        }
        if !appended { throw Self.appendFailed }
        // libcurl adds "Expect: 100-continue" to large bodies and then waits up to a second for
        // servers that never send 100; an empty Expect header turns that off.
        if !headers.contains("Expect") {
            guard append(Array("Expect:\0".utf8)) else { throw Self.appendFailed }
        }
        try check(ccurl_easy_setopt_slist(easy.pointer, CURLOPT_HTTPHEADER, headerList))
    }

    private static let appendFailed = HTTPClientError(kind: .other, requestSent: false, function: "curl_slist_append", reason: "returned NULL")

    /// Appends the NUL-terminated `line` to the request's header list; false when libcurl could not.
    private func append(_ line: [UInt8]) -> Bool {
        let list = line.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { curl_slist_append(headerList, $0.baseAddress) }
        }
        guard let list else { return false }
        headerList = list
        return true
    }

    private func check(_ code: CURLcode) throws(HTTPClientError) {
        guard code == CURLE_OK else {
            throw HTTPClientError(curlCode: code, function: "curl_easy_setopt", requestSent: false)
        }
    }

    // MARK: Callbacks (on the worker thread, inside curl_multi_perform)

    /// Appends body bytes; false aborts the transfer when the limit would be exceeded.
    fileprivate func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard body.count + bytes.count <= maxResponseBytes else {
            exceededLimit = true
            return false
        }
        body.append(contentsOf: bytes)
        return true
    }

    /// One header line including its CRLF. A status line starts a new header block, so only the
    /// final response's fields survive `100 Continue` or proxy responses.
    fileprivate func receiveHeaderLine(_ bytes: UnsafeRawBufferPointer) {
        var line = bytes[...]
        while let last = line.last, last == 13 || last == 10 { line = line.dropLast() }
        if line.starts(with: "HTTP/".utf8) {
            responseHeaders = HTTPHeaders()
            return
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        let name = line[..<colon].trimmingWhitespace()
        let value = line[(colon + 1)...].trimmingWhitespace()
        guard !name.isEmpty else { return }
        // Kept as the bytes they are, as the server bridge keeps a request's (read back as text
        // with invalid UTF-8 replaced): no `String` of each made and copied again.
        responseHeaders.add(name: UnsafeRawBufferPointer(rebasing: name), value: UnsafeRawBufferPointer(rebasing: value))
    }

    // MARK: Completion

    /// Resumes the caller with the response or an error for `code`.
    func complete(_ code: CURLcode) {
        var requestSize = 0
        _ = ccurl_easy_getinfo_long(easy.pointer, CURLINFO_REQUEST_SIZE, &requestSize)
        guard code == CURLE_OK else {
            var error = HTTPClientError(curlCode: code, function: "curl_multi_perform", requestSent: requestSize > 0)
            // A failed send may have written part of the request before CURLINFO_REQUEST_SIZE
            // counts it, and a receive failure means it was written: never claim "not sent" then.
            if error.kind == .sendFailed || error.kind == .receiveFailed { error.requestSent = true }
            if exceededLimit || code == CURLE_FILESIZE_EXCEEDED {
                error.kind = .tooLarge
                error.reason = "response body exceeds \(maxResponseBytes) bytes"
            }
            continuation.resume(throwing: error)
            return
        }
        var status = 0
        _ = ccurl_easy_getinfo_long(easy.pointer, CURLINFO_RESPONSE_CODE, &status)
        continuation.resume(returning: HTTPClientResponse(status: status, headers: responseHeaders, body: body))
    }

    /// Resumes the caller with `error` (cancellation, shutdown, or a failure to start).
    func fail(_ error: any Error) {
        continuation.resume(throwing: error)
    }
}

private func curlWriteCallback(
    _ buffer: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let context else { return 0 }
    let length = size * count
    guard length > 0, let buffer else { return length }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.receiveBody(UnsafeRawBufferPointer(start: buffer, count: length)) ? length : 0
}

private func curlHeaderCallback(
    _ buffer: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let context else { return 0 }
    let length = size * count
    guard length > 0, let buffer else { return length }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    transfer.receiveHeaderLine(UnsafeRawBufferPointer(start: buffer, count: length))
    return length
}

extension Slice where Base == UnsafeRawBufferPointer {
    fileprivate func trimmingWhitespace() -> Slice<UnsafeRawBufferPointer> {
        var result = self
        while let first = result.first, first == 32 || first == 9 { result = result.dropFirst() }
        while let last = result.last, last == 32 || last == 9 { result = result.dropLast() }
        return result
    }
}

extension Double {
    fileprivate func clamped(to range: ClosedRange<Double>) -> Double {
        isNaN ? range.lowerBound : Swift.min(Swift.max(self, range.lowerBound), range.upperBound)
    }
}
