internal import CMicroHTTPD
internal import Glibc
import HTTPCommon

// libmicrohttpd's callbacks: non-capturing C functions reaching their state through the context
// pointers (`cls` is the ServerCore, `req_cls` the RequestContext). A closure that captures
// context crashed the Swift 6.3.1 compiler here, hence free functions.

/// MHD_AccessHandlerCallback: called once when the headers are read, once per body chunk, once
/// when the request is complete, and once more after a suspended connection is resumed.
///
/// A body declared (`Content-Length`) over the limit is answered on the first call, before it is
/// read: MHD then sends the answer without `100 Continue` and closes the connection
/// (RFC 9110 §10.1.1, §15.5.14). A chunked body is dropped past the limit and answered at its end.
func accessHandler(
    _ serverPointer: UnsafeMutableRawPointer?, _ connection: OpaquePointer?, _ url: UnsafePointer<CChar>?,
    _ method: UnsafePointer<CChar>?, _ version: UnsafePointer<CChar>?, _ uploadData: UnsafePointer<CChar>?,
    _ uploadDataSize: UnsafeMutablePointer<Int>?, _ requestPointer: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
) -> MHD_Result {
    guard let serverPointer, let connection, let uploadDataSize, let requestPointer else { return .NO }
    let core = Unmanaged<ServerCore>.fromOpaque(serverPointer).takeUnretainedValue()

    // A target ``readTarget`` refused (too many query parameters, a blank or control byte, a
    // malformed percent-escape): answered on this first call.
    let tooManyParameters = requestPointer.pointee == tooManyParametersMark
    let blankInTarget = requestPointer.pointee == blankInTargetMark
    let fragmentInTarget = requestPointer.pointee == fragmentInTargetMark
    let notASCIIInTarget = requestPointer.pointee == notASCIIInTargetMark
    let malformedEscape = requestPointer.pointee == malformedEscapeInPathMark || requestPointer.pointee == malformedEscapeInQueryMark
    let malformedInQuery = requestPointer.pointee == malformedEscapeInQueryMark
    if let mark = requestPointer.pointee, isMark(mark) { requestPointer.pointee = nil }
    guard let existing = requestPointer.pointee else {
        // First call: headers only. Queueing a response here makes MHD close the connection
        // afterwards, so attach our context and wait for the next call, unless the head is
        // refused (framing, expectations, behaviour §7.4) or the declared body is already too
        // large: then the early answer and the close are what we want.
        let slot = connectionSlot(connection)
        let context = slot?.takeContext() ?? RequestContext(connection: connection)
        requestPointer.pointee = Unmanaged.passRetained(context).toOpaque()
        core.active.add(1, ordering: .relaxed)
        // The buffer moves into the reading and back: held once, it is filled in place.
        var buffer = HTTPHeaders()
        swap(&buffer, &context.headers)
        let head = HeadReading.read(connection, method: method, version: version, into: consume buffer)
        context.headers = head.headers
        context.fieldFacts = head.fieldFacts
        let refusal =
            head.refusal
            ?? (blankInTarget
                ? HTTPHeadRefusal(status: 400, field: nil, reason: "The request target holds a space or a control character (RFC 9112 §3.2).")
                : nil)
            ?? (fragmentInTarget
                ? HTTPHeadRefusal(
                    status: 400, field: nil, reason: "The request target holds a '#': a fragment is never sent to a server (RFC 9110 §7.1); send '#' as %23.")
                : nil)
            ?? (notASCIIInTarget
                ? HTTPHeadRefusal(
                    status: 400, field: nil, reason: "The request target holds a byte outside ASCII; send it percent-encoded (RFC 3986 §2.1, RFC 9112 §3.2).")
                : nil)
            ?? (tooManyParameters
                ? HTTPHeadRefusal(status: 414, field: nil, reason: "The request target holds more than \(core.maxQueryParameters) query parameters.")
                : nil)
        if refusal != nil || malformedEscape {
            let request = makeRequest(connection: connection, url: url, method: method, version: version, context: context)
            // readTarget left only the name of the parameter holding the escape as the query.
            let refusal = refusal ?? malformedEscapeRefusal(parameter: malformedInQuery ? request.query.first?.name ?? "" : nil)
            return answerRefused(refusal, request, core: core, connection: connection, context: context)
        }
        if head.contentLength > core.maxBodyBytes {
            context.bodyExceededLimit = true
            return dispatch(context, core: core, connection: connection, url: url, method: method, version: version)
        }
        // libmicrohttpd sends `100 Continue` once this call returns without an answer (HTTP/1.1
        // only): the handler decides first, so an unknown key never gets to send its body.
        guard head.expectsContinue, let version, strcmp(version, "HTTP/1.0") != 0 else { return .YES }
        let request = makeRequest(connection: connection, url: url, method: method, version: version, context: context)
        context.isHead = request.method == "HEAD"
        switch core.handler.admitHead(request) {
        case .proceed:
            return .YES
        case .respond(let response):
            return queue(closing(response), on: connection, head: request.method == "HEAD", holding: context)
        case .suspend(let decide):
            context.isDecidingHead = true
            if core.suspend(context, deciding: { await decide().map { .respond(closing($0)) } ?? .proceed }) { return .YES }
            context.isDecidingHead = false
            return queue(HTTPResponse(status: 503), on: connection, head: request.method == "HEAD", holding: context)
        }
    }
    let context = Unmanaged<RequestContext>.fromOpaque(existing).takeUnretainedValue()

    if context.isDecidingHead {
        // Back from MHD_resume_connection with the head's decision, still before the body.
        context.isDecidingHead = false
        context.isSuspended = false
        let outcome = context.outcome.withLock { outcome in
            defer { outcome = .pending }
            return outcome
        }
        switch outcome {
        case .proceed: return .YES
        case .respond(let response): return queue(response, on: connection, head: context.isHead, holding: context)
        case .pending, .close: return .NO
        }
    }

    if context.isSuspended {
        // Back from MHD_resume_connection: send what the async handler produced. Body bytes
        // still arriving here belong to a body over the limit: drop them.
        uploadDataSize.pointee = 0
        let outcome = context.outcome.withLock { $0 }
        guard case .respond(let response) = outcome else { return .NO }
        return queue(response, on: connection, head: context.isHead, holding: context)
    }

    if uploadDataSize.pointee > 0 {
        context.append(UnsafeRawBufferPointer(start: uploadData, count: uploadDataSize.pointee), limit: core.maxBodyBytes)
        uploadDataSize.pointee = 0
        return .YES
    }

    // The request is complete. A chunked body that went over the limit was read and dropped to
    // here: libmicrohttpd 0.9.75 refuses a response queued in the middle of the body.
    return dispatch(context, core: core, connection: connection, url: url, method: method, version: version)
}

/// Hands the request to the handler: answers at once if `respondImmediately` does, otherwise
/// suspends the connection for the async handler to continue from what it prepared (503 if the server is stopping).
private func dispatch(
    _ context: RequestContext, core: ServerCore, connection: OpaquePointer, url: UnsafePointer<CChar>?,
    method: UnsafePointer<CChar>?, version: UnsafePointer<CChar>?
) -> MHD_Result {
    // The whole request is in: its deadline stops here, not at the head, so a body trickled a
    // byte at a time is cut off like a trickled head (the clock covers head and body).
    connectionSlot(connection)?.track?.requestStarted()
    let request = makeRequest(connection: connection, url: url, method: method, version: version, context: context)
    context.isHead = request.method == "HEAD"
    if let parameter = context.queryParameterNotUTF8.map(QuotedText.shown) {
        // After percent-decoding, a value (or name) that is not UTF-8 would be read with U+FFFD in
        // place of its bytes, as if meant (`?username=%C3%28` listed nobody).
        let refusal = HTTPHeadRefusal(
            status: 400, field: parameter, reason: "The query parameter '\(parameter)' is not UTF-8 once percent-decoded (RFC 3986 §2.5).")
        return answerRefused(refusal, request, core: core, connection: connection, context: context)
    }
    switch core.handler.first(consume request) {
    case .respond(let response):
        return queue(response, on: connection, head: context.isHead, holding: context)
    case .suspend(let respond):
        if core.suspend(context, continuing: respond) { return .YES }
    }
    return queue(HTTPResponse(status: 503), on: connection, head: context.isHead, holding: context)
}

/// The handler's answer to a request the server refuses (``HTTPHandler/refused(_:request:)``);
/// the connection closes after it.
private func answerRefused(
    _ refusal: HTTPHeadRefusal, _ request: HTTPRequest, core: ServerCore, connection: OpaquePointer, context: RequestContext
) -> MHD_Result {
    queue(closing(core.handler.refused(refusal, request)), on: connection, head: request.method == "HEAD", holding: context)
}

/// An answer sent before the body was read: the connection closes after it (libmicrohttpd would
/// close it anyway; the header says so).
private func closing(_ response: HTTPResponse) -> HTTPResponse {
    var response = response
    response.headers.set("Connection", "close")
    return response
}

/// The `req_cls` ``readTarget`` gives a request whose target holds too many query parameters: not
/// a context, only a mark for the first access-handler call (and never released).
nonisolated(unsafe) private let tooManyParametersMark = UnsafeMutableRawPointer(bitPattern: 0x7F)!
/// The `req_cls` ``readTarget`` gives a request whose target holds a space or a control byte.
nonisolated(unsafe) private let blankInTargetMark = UnsafeMutableRawPointer(bitPattern: 0x7E)!
/// The `req_cls` ``readTarget`` gives a request whose target holds a `#`.
nonisolated(unsafe) private let fragmentInTargetMark = UnsafeMutableRawPointer(bitPattern: 0x7B)!
/// The `req_cls` ``readTarget`` gives a request whose target holds a byte outside ASCII.
nonisolated(unsafe) private let notASCIIInTargetMark = UnsafeMutableRawPointer(bitPattern: 0x7A)!
/// The `req_cls` ``readTarget`` gives a request whose path holds a malformed percent-escape.
nonisolated(unsafe) private let malformedEscapeInPathMark = UnsafeMutableRawPointer(bitPattern: 0x7D)!
/// The `req_cls` ``readTarget`` gives a request whose query holds a malformed percent-escape.
nonisolated(unsafe) private let malformedEscapeInQueryMark = UnsafeMutableRawPointer(bitPattern: 0x7C)!

/// A visible ASCII byte other than `#`, `%`, `&` and `?`: nothing ``readTarget`` acts on.
@inline(__always)
private func isPlainTargetByte(_ byte: UInt8) -> Bool {
    // Bits 0x23 `#`, 0x25 `%`, 0x26 `&` and 0x3F `?` of the bytes below 64.
    let acted: UInt64 = 1 << 0x23 | 1 << 0x25 | 1 << 0x26 | 1 << 0x3F
    return byte &- 0x21 < 0x5E && (byte >= 64 || acted >> UInt64(byte) & 1 == 0)
}

private func isMark(_ pointer: UnsafeMutableRawPointer) -> Bool {
    pointer == tooManyParametersMark || pointer == blankInTargetMark || pointer == malformedEscapeInPathMark || pointer == malformedEscapeInQueryMark
        || pointer == fragmentInTargetMark || pointer == notASCIIInTargetMark
}

/// 400 for a `%` not followed by two hexadecimal digits (RFC 3986 §2.1): naming the query
/// parameter that holds it (`parameter`, its name as decoded), or the path when nil.
private func malformedEscapeRefusal(parameter: String?) -> HTTPHeadRefusal {
    let escape = "a '%' not followed by two hexadecimal digits (RFC 3986 §2.1; a literal '%' is sent as %25)"
    guard let parameter = parameter.map(QuotedText.shown) else { return HTTPHeadRefusal(status: 400, field: nil, reason: "The request path holds \(escape).") }
    return HTTPHeadRefusal(status: 400, field: parameter, reason: "The query parameter '\(parameter)' holds \(escape).")
}

/// MHD_OPTION_URI_LOG_CALLBACK: the request target as received, before libmicrohttpd parses its
/// query into the connection's memory, where each parameter takes about 64 bytes and a few
/// hundred exhaust it (the client then got no answer at all). Past
/// ``HTTPServerConfiguration/maxQueryParameters`` the query is cut off here, in the read buffer
/// libmicrohttpd is parsing (the `?` keeps its place: the target ends after it), so nothing of it
/// is kept, and the request is marked for a 414 on its first access-handler call.
///
/// A target holding a space (`GET /a b HTTP/1.1`, which libmicrohttpd reads as the target `/a b`;
/// its strict mode closes the connection without an answer instead) or another control byte is
/// marked for a 400 (RFC 9112 §3.2): its query is cut off the same way. So is one holding a `#`
/// (a fragment is never sent to a server, RFC 9110 §7.1: `/healthz#x` was 404) or a byte outside
/// ASCII (RFC 3986 §2: only percent-encoded; `/v1/accounts/é` was 404).
///
/// Query pieces that carry nothing are taken out (``keepingNamedPieces(_:limit:)``).
///
/// A `%` not followed by two hexadecimal digits (RFC 3986 §2.1) is no escape: decoding leaves it
/// as it is, so `?username=%zz` was read as the text `%zz` and answered as if it were meant. The
/// request is marked for a 400; when the `%` is in the query, the query is cut down to the name of
/// the parameter holding it (moved to just after the `?`), so the answer can name that parameter as
/// decoded, the one way a `req_cls` mark carries it to the access handler. Checked here, before
/// decoding, because decoding cannot tell `%zz` sent from `%25zz` sent.
func readTarget(_ serverPointer: UnsafeMutableRawPointer?, _ uri: UnsafePointer<CChar>?, _ connection: OpaquePointer?) -> UnsafeMutableRawPointer? {
    guard let serverPointer, let uri else { return nil }
    var scan = uri
    var question: UnsafePointer<CChar>?
    var parameterStart: UnsafePointer<CChar>?
    var malformedEscape = false
    var malformedParameter: UnsafePointer<CChar>?  // where the query parameter holding it starts
    while scan.pointee != 0 {
        let byte = UInt8(bitPattern: scan.pointee)
        // Most bytes of a target are none of the ones looked at below: one test each (the
        // tests below cost about 20 instructions a byte, behaviour §10).
        if isPlainTargetByte(byte) {
            scan += 1
            continue
        }
        if byte <= 0x20 || byte == 0x7F || byte == UInt8(ascii: "#") || byte >= 0x80 {
            if let question = strchr(uri, Int32(UInt8(ascii: "?"))) { UnsafeMutablePointer(mutating: question)[1] = 0 }
            return byte == UInt8(ascii: "#") ? fragmentInTargetMark : byte >= 0x80 ? notASCIIInTargetMark : blankInTargetMark
        }
        switch byte {
        case UInt8(ascii: "?") where question == nil:
            question = scan
            parameterStart = scan + 1
        case UInt8(ascii: "&") where question != nil:
            parameterStart = scan + 1
        // `scan[2]` is read only when `scan[1]` is a hex digit, so never past the terminator.
        case UInt8(ascii: "%") where !malformedEscape && (hexValue(scan[1]) == nil || hexValue(scan[2]) == nil):
            malformedEscape = true
            malformedParameter = parameterStart
        default:
            break
        }
        scan += 1
    }
    if malformedEscape {
        guard let question, let start = malformedParameter else {
            if let question { UnsafeMutablePointer(mutating: question)[1] = 0 }
            return malformedEscapeInPathMark
        }
        // The parameter's name: up to its `=`, `&` or the end. Moved left in libmicrohttpd's own
        // buffer (writable; the pointer is const only in its signature), then the query ends.
        var end = start
        while end.pointee != 0 && end.pointee != CChar(UInt8(ascii: "=")) && end.pointee != CChar(UInt8(ascii: "&")) { end += 1 }
        let destination = UnsafeMutablePointer(mutating: question) + 1
        let length = end - start
        memmove(destination, start, length)
        destination[length] = 0
        return malformedEscapeInQueryMark
    }
    guard let question else { return nil }
    let limit = Unmanaged<ServerCore>.fromOpaque(serverPointer).takeUnretainedValue().maxQueryParameters
    return keepingNamedPieces(UnsafeMutablePointer(mutating: question) + 1, limit: limit) ? nil : tooManyParametersMark
}

/// Takes the pieces of `query` (the bytes after the `?`, up to its terminator) that carry neither
/// name nor value (empty, `&&`, or `=` alone) out of it, in place, and counts the others: they are
/// ignored (behaviour §7.4), so they do not count toward `limit`, but libmicrohttpd records each
/// piece it parses as a parameter in the connection's memory, so they cannot stay either
/// (`?&&&…` with 300 pieces was 414). One pass; bytes move only after a piece was taken out.
/// - Returns: false, with the query cut off, when more than `limit` pieces carry something.
private func keepingNamedPieces(_ query: UnsafeMutablePointer<CChar>, limit: Int) -> Bool {
    let ampersand = CChar(UInt8(ascii: "&"))
    var read = query
    var write = query
    var pieces = 0
    while read.pointee != 0 {
        var end = read
        while end.pointee != 0 && end.pointee != ampersand { end += 1 }
        let length = end - read
        if length > 1 || (length == 1 && read.pointee != CChar(UInt8(ascii: "="))) {
            pieces += 1
            guard pieces <= limit else {
                // The buffer is libmicrohttpd's own, writable; the pointer is const only in its signature.
                query[0] = 0
                return false
            }
            if write != query {
                write.pointee = ampersand
                write += 1
            }
            if write != read { memmove(write, read, length) }
            write += length
        }
        read = end.pointee == 0 ? end : end + 1
    }
    write.pointee = 0
    return true
}

/// MHD_RequestCompletedCallback: the request is over (answered, client gone, timeout or daemon
/// shutdown); release the context attached on the first access-handler call.
func requestCompleted(
    _ serverPointer: UnsafeMutableRawPointer?, _ connection: OpaquePointer?,
    _ requestPointer: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, _ reason: MHD_RequestTerminationCode
) {
    let slot = connection.flatMap(connectionSlot)
    slot?.track?.requestCompleted()
    guard let requestPointer, let existing = requestPointer.pointee else { return }
    guard !isMark(existing) else {
        // Ended before its first access-handler call: no context was made, none counted.
        requestPointer.pointee = nil
        return
    }
    var context = Unmanaged<RequestContext>.fromOpaque(existing).takeRetainedValue()
    requestPointer.pointee = nil
    slot?.keep(&context)
    if let serverPointer {
        Unmanaged<ServerCore>.fromOpaque(serverPointer).takeUnretainedValue().active.subtract(1, ordering: .relaxed)
    }
}

/// What a connection keeps between its requests, in libmicrohttpd's socket context from the
/// "connection started" notification to the "closed" one: its head-deadline track (when
/// deadlines are on), the request context of its last request (reused for the next, with its
/// buffers), its peer's address text and its last request's path (behaviour §10: each was made
/// per request).
final class ConnectionSlot: @unchecked Sendable {
    // @unchecked: `spare` is touched only by the polling thread that owns the connection.
    let track: RequestHeadDeadlines.Track?
    private var spare: RequestContext?

    init(track: RequestHeadDeadlines.Track?) {
        self.track = track
    }

    /// The connection's peer address as text, read once per connection.
    private var peer: String??
    /// The path of the connection's previous request as the target gave it, and as ``HTTPRequest/path``.
    private var lastPath: (target: [UInt8], path: String)?

    func remoteAddress(_ connection: OpaquePointer) -> String? {
        if let peer { return peer }
        let address = peerAddress(connection)
        peer = .some(address)
        return address
    }

    /// The ``HTTPRequest/path`` of the request target `url`: the previous request's when the
    /// target is the same bytes.
    func path(_ url: UnsafePointer<CChar>) -> String {
        let count = strlen(url)
        if let lastPath, lastPath.target.count == count,
            lastPath.target.withUnsafeBytes({ memcmp($0.baseAddress!, url, count) == 0 })
        {
            return lastPath.path
        }
        let path = originPath(String(cString: url))
        lastPath = (Array(UnsafeRawBufferPointer(start: url, count: count)), path)
        return path
    }

    /// The context kept from the connection's previous request, reset; nil if none.
    func takeContext() -> RequestContext? {
        defer { spare = nil }
        return spare
    }

    /// Keeps a completed request's context for the next request, unless something else (a
    /// handler's task not yet finished with it) still holds it.
    func keep(_ context: inout RequestContext) {
        guard isKnownUniquelyReferenced(&context) else { return }
        context.reset()
        spare = context
    }
}

/// MHD_NotifyConnectionCallback: a connection opened or is about to close. A started connection
/// gets its ``ConnectionSlot`` (retained in its socket context; with request-head deadlines on,
/// holding its track) and a closing one gives it back, before MHD closes the socket (see
/// `RequestHeadDeadlines`).
func connectionNotified(
    _ serverPointer: UnsafeMutableRawPointer?, _ connection: OpaquePointer?, _ socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
    _ event: MHD_ConnectionNotificationCode
) {
    guard let serverPointer, let connection, let socketContext else { return }
    let core = Unmanaged<ServerCore>.fromOpaque(serverPointer).takeUnretainedValue()
    // MHD_CONNECTION_NOTIFY_STARTED = 0, MHD_CONNECTION_NOTIFY_CLOSED = 1 (the enum imports without its case names).
    switch event.rawValue {
    case 0:
        var track: RequestHeadDeadlines.Track?
        if let deadlines = core.headDeadlines {
            let socket = cmhd_connection_fd(connection)
            if socket >= 0 { track = deadlines.opened(socket: socket) }
        }
        socketContext.pointee = Unmanaged.passRetained(ConnectionSlot(track: track)).toOpaque()
    case 1:
        guard let existing = socketContext.pointee else { return }
        let slot = Unmanaged<ConnectionSlot>.fromOpaque(existing)
        if let track = slot.takeUnretainedValue().track { core.headDeadlines?.closed(track) }
        slot.release()
        socketContext.pointee = nil
    default:
        return
    }
}

/// The connection's slot (nil only before the "connection started" notification).
private func connectionSlot(_ connection: OpaquePointer) -> ConnectionSlot? {
    guard let pointer = cmhd_connection_socket_context(connection) else { return nil }
    return Unmanaged<ConnectionSlot>.fromOpaque(pointer).takeUnretainedValue()
}

/// Builds the HTTPRequest from what MHD parsed. MHD already percent-decoded the path (and took
/// the query off it) and the query names and values (`+` becoming a space).
///
/// A connection's peer address and its last path are kept in its ``ConnectionSlot``: the address
/// does not change over a connection, and a client on a kept-alive connection mostly asks for
/// the same path again (each was a `String` made and validated per request, behaviour §10).
///
/// The first query parameter whose name or value is not UTF-8 once decoded is left in
/// ``RequestContext/queryParameterNotUTF8`` (its name repaired), for ``dispatch`` to refuse.
private func makeRequest(
    connection: OpaquePointer, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?, version: UnsafePointer<CChar>?,
    context: RequestContext
) -> HTTPRequest {
    var collected = QueryItems()
    _ = withUnsafeMutablePointer(to: &collected) {
        MHD_get_connection_values_n(connection, .GET_ARGUMENT_KIND, collectQueryItem, $0)
    }
    context.queryParameterNotUTF8 = collected.firstNotUTF8
    let query = collected.items
    let slot = connectionSlot(connection)
    return HTTPRequest(
        method: method.map { commonMethod($0) ?? String(cString: $0) } ?? "GET",
        path: url.map { slot?.path($0) ?? originPath(String(cString: $0)) } ?? "/",
        query: query,
        headers: context.headers,
        body: context.body,
        bodyExceededLimit: context.bodyExceededLimit,
        remoteAddress: slot?.remoteAddress(connection) ?? peerAddress(connection),
        // The usual version as a literal: no string made per request.
        version: version.map { strcmp($0, "HTTP/1.1") == 0 ? "HTTP/1.1" : String(cString: $0) },
        fieldFacts: context.fieldFacts
    )
}

/// The numeric text of the connection's peer address, or nil.
private func peerAddress(_ connection: OpaquePointer) -> String? {
    cmhd_connection_client_address(connection).flatMap { SocketAddress.numericHost(of: $0) }
}

/// The methods most requests use, as literals (no string made per request).
private func commonMethod(_ method: UnsafePointer<CChar>) -> String? {
    if strcmp(method, "POST") == 0 { return "POST" }
    if strcmp(method, "GET") == 0 { return "GET" }
    return nil
}

/// The path of a request target: an absolute-form target (`http://host/path`, which a server
/// must accept, RFC 9112 §3.2.2) gives its path, `/` when it has none; any other form is itself.
func originPath(_ target: String) -> String {
    let utf8 = target.utf8
    // Nearly every target is in origin form: one byte tells.
    guard utf8.first != UInt8(ascii: "/"), let schemeLength = httpSchemeLength({ $0 < utf8.count ? utf8[utf8.index(utf8.startIndex, offsetBy: $0)] : 0 })
    else { return target }
    let rest = utf8[utf8.index(utf8.startIndex, offsetBy: schemeLength)...]
    guard let slash = rest.firstIndex(of: UInt8(ascii: "/")) else { return "/" }
    return String(Substring(utf8[slash...]))
}

/// The length of a leading `http://` or `https://` (any case) in the bytes `byte(offset)` gives
/// (0 past the end), or nil. The bytes are read in order and only while they match.
private func httpSchemeLength(_ byte: (Int) -> UInt8) -> Int? {
    schemes: for scheme in ["http://", "https://"] {
        for (offset, expected) in scheme.utf8.enumerated() where byte(offset) | 0x20 != expected && byte(offset) != expected {
            continue schemes
        }
        return scheme.utf8.count
    }
    return nil
}

/// MHD_KeyValueIteratorN appending each query parameter, in order; `?flag` gives value "".
private func collectQueryItem(
    _ queryPointer: UnsafeMutableRawPointer?, _ kind: MHD_ValueKind, _ key: UnsafePointer<CChar>?, _ keySize: Int,
    _ value: UnsafePointer<CChar>?, _ valueSize: Int
) -> MHD_Result {
    guard let queryPointer else { return .NO }
    let collected = queryPointer.assumingMemoryBound(to: QueryItems.self)
    let name = string(key, keySize)
    if collected.pointee.firstNotUTF8 == nil, !isUTF8(key, keySize) || !isUTF8(value, valueSize) {
        collected.pointee.firstNotUTF8 = name
    }
    collected.pointee.items.append((name: name, value: string(value, valueSize)))
    return .YES
}

/// The query parameters libmicrohttpd decoded, in order, and the first one that is not UTF-8.
private struct QueryItems {
    var items: [(name: String, value: String)] = []
    var firstNotUTF8: String?
}

/// Whether `count` bytes at `pointer` are UTF-8 (`String(decoding:)` would replace what is not).
private func isUTF8(_ pointer: UnsafePointer<CChar>?, _ count: Int) -> Bool {
    guard let pointer, count > 0 else { return true }
    return String(validating: UnsafeRawBufferPointer(start: pointer, count: count), as: UTF8.self) != nil
}

private func string(_ pointer: UnsafePointer<CChar>?, _ count: Int) -> String {
    guard let pointer, count > 0 else { return "" }
    return String(decoding: UnsafeRawBufferPointer(start: pointer, count: count), as: UTF8.self)
}

/// Hands the response to MHD and queues it. MHD computes `Content-Length` itself (and omits
/// the body for HEAD, RFC 9110 §9.3.2), so a handler's own is skipped; a header MHD rejects
/// (e.g. with a line break) turns the answer into a bare 500.
///
/// The body is not copied: MHD sends it from the array's own storage (`MHD_RESPMEM_PERSISTENT`),
/// which the request's `context` holds until the request completes, then gives back to
/// ``BodyBuffers`` for a later answer (``RequestContext/reset()``). libmicrohttpd sends a
/// response only before it reports the request completed (and destroys it before that report),
/// and the context is reset only then; a copy of every body (a `malloc`, a `memcpy` and a `free`)
/// cost a cached answer about 0.5k instructions (behaviour §10).
///
/// An answer to HEAD without a body but with a `Content-Length` (a relayed HEAD, whose upstream
/// sent the length a GET would have) keeps that length: MHD would have sent 0, which RFC 9110
/// §8.6 forbids unless a GET's content would be empty too.
private func queue(_ response: HTTPResponse, on connection: OpaquePointer, head: Bool, holding context: RequestContext) -> MHD_Result {
    let created: OpaquePointer?
    if head, response.body.isEmpty, let length = declaredLength(response.headers), length > 0 {
        // MHD never reads a HEAD answer's content: the reader is there to give it a size.
        created = MHD_create_response_from_callback(length, 4096, unreadContent, nil, nil)
    } else {
        // The storage stays where it is while the context holds the array (nothing mutates it):
        // the address outlives this closure on purpose.
        context.responseBody = response.body
        created = context.responseBody.withUnsafeBytes { bytes in
            MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_PERSISTENT)
        }
    }
    guard let mhdResponse = created else { return .NO }
    defer { MHD_destroy_response(mhdResponse) }
    // The names and values as they lie in the headers' buffer, NUL-terminated: no C string made per field.
    let added = response.headers.withEachCField { name, value in
        strcasecmp(name, "Content-Length") == 0 || MHD_add_response_header(mhdResponse, name, value) == .YES
    }
    // `withCString` lends a native string's own NUL-terminated bytes; a `String` passed as a bare
    // C-string argument is copied into an array first.
    let named = response.clientRequestId.map { id in id.withCString { MHD_add_response_header(mhdResponse, "client-request-id", $0) == .YES } } ?? true
    guard added && named else { return queue(HTTPResponse(status: 500), on: connection, head: head, holding: context) }
    guard (100...999).contains(response.status) else { return queue(HTTPResponse(status: 500), on: connection, head: head, holding: context) }
    return MHD_queue_response(connection, UInt32(response.status), mhdResponse)
}

/// A `Content-Length` of decimal digits only, as a byte count.
private func declaredLength(_ headers: HTTPHeaders) -> UInt64? {
    guard let text = headers["Content-Length"], !text.isEmpty, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
    return UInt64(text)
}

/// MHD_ContentReaderCallback of a HEAD answer's content, which MHD never asks for: an error if it did.
private func unreadContent(_ context: UnsafeMutableRawPointer?, _ position: UInt64, _ buffer: UnsafeMutablePointer<CChar>?, _ max: Int) -> Int {
    -2  // MHD_CONTENT_READER_END_WITH_ERROR
}

/// MHD_UnescapeCallback: decodes `%XX` in the URL path and in query arguments in place, like
/// libmicrohttpd's own `MHD_http_unescape`, except three escapes in the path, which stay as they
/// were sent (see ``HTTPRequest/path``):
/// - `%2F` and `%25`: decoded, a slash would become a separator (`/v1%2Faccounts` routed as the
///   account list, `users%2Falice` relayed as `users/alice`) and a decoded `%` could then read as
///   an escape; the router decodes them per segment (``HTTPRequest/decodedSegment(_:)``).
/// - `%00`: libmicrohttpd hands the path to the access handler as a C string, so a decoded NUL
///   would cut it short (`/v1/accounts/<id>%00anything` would name `<id>`).
/// Query arguments reach the handler with their lengths, so a NUL there survives and is refused
/// by the application, naming the field. The path is the one string that starts with `/` (origin
/// form) or `http(s)://` (absolute form); a query value starting so keeps those escapes too, which
/// is harmless. `+` in query arguments is turned into a space by libmicrohttpd before this runs.
/// - Returns: the decoded length (bytes), without the terminating NUL.
func percentDecode(_ context: UnsafeMutableRawPointer?, _ connection: OpaquePointer?, _ text: UnsafeMutablePointer<CChar>?) -> Int {
    guard let text else { return 0 }
    // Most paths and query arguments hold no escape: nothing to decode (a byte-wise copy onto
    // itself cost about 10 instructions a byte, behaviour §10).
    guard strchr(text, Int32(UInt8(ascii: "%"))) != nil else { return strlen(text) }
    // The path: origin form (`/…`) or absolute form (`http://host/…`, RFC 9112 §3.2.2).
    // (A NUL ends the scheme comparison before any byte past it is read.)
    let isPath = text[0] == CChar(UInt8(ascii: "/")) || httpSchemeLength({ UInt8(bitPattern: text[$0]) }) != nil
    var read = 0
    var write = 0
    while text[read] != 0 {
        // `text[read + 1]` is read only when it is not the terminator (hexValue(0) is nil).
        if text[read] == CChar(UInt8(ascii: "%")), let high = hexValue(text[read + 1]), let low = hexValue(text[read + 2]),
            !isPath || !HTTPRequest.pathKeepsEscaped(high << 4 | low)
        {
            text[write] = CChar(bitPattern: high << 4 | low)
            read += 3
        } else {
            text[write] = text[read]
            read += 1
        }
        write += 1
    }
    text[write] = 0
    return write
}

/// The value of a hexadecimal digit (either case), or nil (also for the terminating NUL).
private func hexValue(_ character: CChar) -> UInt8? {
    switch UInt8(bitPattern: character) {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt8(bitPattern: character) - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt8(bitPattern: character) - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt8(bitPattern: character) - UInt8(ascii: "A") + 10
    default: nil
    }
}
