import HTTPCommon
import HTTPServerBridge
import Synchronization

/// A webhook receiver: answers 503 until `setUp(true)`, then 200; records every request.
/// `setDelay(_:)` makes it hold each answer that long (a slow receiver).
final class WebhookReceiver: HTTPHandler {
    struct Delivery: Sendable {
        let path: String
        let eventId: String
        let signature: String
        let contentType: String
        let body: [UInt8]
        let status: Int
    }

    private struct State {
        var up = false
        var delaySeconds = 0.0
        var requests: [Delivery] = []
        /// Requests received and not yet answered, and the most there ever were at once.
        var inFlight = 0
        var maxInFlight = 0
    }

    private let state = Mutex(State())

    var requests: [Delivery] { state.withLock { $0.requests } }
    var accepted: [Delivery] { requests.filter { $0.status == 200 } }
    var inFlight: Int { state.withLock { $0.inFlight } }
    var maxInFlight: Int { state.withLock { $0.maxInFlight } }

    func setUp(_ up: Bool) { state.withLock { $0.up = up } }
    func setDelay(_ seconds: Double) { state.withLock { $0.delaySeconds = seconds } }

    func respondImmediately(to request: HTTPRequest) -> HTTPFirstStep<HTTPRequest> {
        state.withLock { $0.delaySeconds > 0 } ? .suspend(request) : .respond(record(request))
    }

    func respond(to request: HTTPRequest) async -> HTTPResponse {
        let delay = state.withLock { state in
            state.inFlight += 1
            state.maxInFlight = max(state.maxInFlight, state.inFlight)
            return state.delaySeconds
        }
        try? await Task.sleep(for: .seconds(delay))
        state.withLock { $0.inFlight -= 1 }
        return record(request)
    }

    private func record(_ request: HTTPRequest) -> HTTPResponse {
        state.withLock { state in
            let status = state.up ? 200 : 503
            state.requests.append(
                Delivery(
                    path: request.path, eventId: request.headers["TokenRelay-Event-Id"] ?? "", signature: request.headers["TokenRelay-Signature"] ?? "",
                    contentType: request.headers["Content-Type"] ?? "", body: request.body, status: status))
            return HTTPResponse(status: status)
        }
    }
}
