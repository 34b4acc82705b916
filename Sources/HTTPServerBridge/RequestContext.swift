import HTTPCommon
import Synchronization

/// Per-request state libmicrohttpd carries for us in its `req_cls` pointer, from the first
/// access-handler call until the request-completed callback releases it. A connection's
/// ``ConnectionSlot`` keeps it for the connection's next request (``reset()``), with the
/// capacity of its header and body buffers: no context, header buffer or body buffer allocated
/// per request on a kept-alive connection (behaviour §10).
final class RequestContext: @unchecked Sendable {
    // @unchecked: `body`, `bodyExceededLimit` and `isSuspended` are only touched by the MHD
    // polling thread that owns the connection (MHD never runs one connection on two threads);
    // for the same reason their accesses are not checked for exclusivity at run time (two
    // `swift_beginAccess` calls per request and field read).
    // What crosses threads, the async handler's outcome, sits behind `outcome`'s Mutex.

    /// What the polling thread should do when the suspended connection comes back.
    enum Outcome: Sendable {
        case pending
        case respond(HTTPResponse)
        /// The head was admitted (``HTTPHeadStep/proceed``): invite and read the body.
        case proceed
        /// The server is stopping: close without an answer.
        case close
    }

    /// The connection, used only while it is suspended and registered with the server (see
    /// `ServerCore.resume`), never after the request completed.
    let connection: OpaquePointer
    @exclusivity(unchecked) var body: [UInt8] = []
    @exclusivity(unchecked) var bodyExceededLimit = false
    /// Set when the connection was handed to the async handler; the next handler call for it is
    /// the one after `MHD_resume_connection`.
    @exclusivity(unchecked) var isSuspended = false
    /// Set while the head of a request that asked for `100 Continue` is being decided off the
    /// server thread (``HTTPHandler/admitHead(_:)``); the next handler call is the one after
    /// `MHD_resume_connection`, still before the body.
    @exclusivity(unchecked) var isDecidingHead = false
    /// The header fields, read once on the first handler call.
    @exclusivity(unchecked) var headers = HTTPHeaders()
    @exclusivity(unchecked) var fieldFacts: HeaderFieldFacts?
    /// A HEAD request: its answer carries the length a GET would have had, and no body.
    @exclusivity(unchecked) var isHead = false
    /// The name of the first query parameter that is not UTF-8 once decoded (the request is refused).
    @exclusivity(unchecked) var queryParameterNotUTF8: String?
    /// The body of the response queued for the request: libmicrohttpd sends it from this array's
    /// storage, so it is held until the request completes (see `queue` in MHDCallbacks).
    @exclusivity(unchecked) var responseBody: [UInt8] = []
    let outcome = Mutex<Outcome>(.pending)

    init(connection: OpaquePointer) {
        self.connection = connection
    }

    /// Makes the context ready for the connection's next request, keeping its buffers' capacity
    /// (a buffer a request still shares is left to it: a new one is made on the next write).
    func reset() {
        body.removeAll(keepingCapacity: true)
        bodyExceededLimit = false
        isSuspended = false
        isDecidingHead = false
        headers.removeAll(keepingCapacity: true)
        fieldFacts = nil
        isHead = false
        queryParameterNotUTF8 = nil
        // Sent: its buffer serves a later answer (``BodyBuffers``).
        var sent: [UInt8] = []
        swap(&sent, &responseBody)
        BodyBuffers.shared.giveBack(consume sent)
        outcome.withLock { $0 = .pending }
    }

    /// Appends uploaded bytes unless the body already went past `limit`, in which case they and
    /// everything read so far are dropped.
    func append(_ bytes: UnsafeRawBufferPointer, limit: Int) {
        guard !bodyExceededLimit else { return }
        if body.count + bytes.count > limit {
            bodyExceededLimit = true
            body = []
        } else {
            body.append(contentsOf: bytes)
        }
    }
}
