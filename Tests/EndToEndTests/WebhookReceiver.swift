import HTTPCommon
import HTTPServerBridge
import Synchronization

/// A webhook receiver: answers 503 until `setUp(true)`, then 200; records every request.
final class WebhookReceiver: HTTPHandler {
    struct Delivery: Sendable {
        let path: String
        let eventId: String
        let signature: String
        let contentType: String
        let body: [UInt8]
        let status: Int
    }

    private let state = Mutex<(up: Bool, requests: [Delivery])>((false, []))

    var requests: [Delivery] { state.withLock { $0.requests } }
    var accepted: [Delivery] { requests.filter { $0.status == 200 } }

    func setUp(_ up: Bool) { state.withLock { $0.up = up } }

    func respondImmediately(to request: HTTPRequest) -> HTTPResponse? {
        state.withLock { state in
            let status = state.up ? 200 : 503
            state.requests.append(
                Delivery(
                    path: request.path, eventId: request.headers["TokenRelay-Event-Id"] ?? "", signature: request.headers["TokenRelay-Signature"] ?? "",
                    contentType: request.headers["Content-Type"] ?? "", body: request.body, status: status))
            return HTTPResponse(status: status)
        }
    }

    func respond(to request: HTTPRequest) async -> HTTPResponse { respondImmediately(to: request)! }
}
