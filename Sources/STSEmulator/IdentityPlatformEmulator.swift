import CryptoBridge
import Foundation
import HTTPCommon
import HTTPServerBridge
import Synchronization

/// The Microsoft identity platform v2.0 endpoints and Microsoft Graph `/v1.0/me`, emulated
/// closely enough for TokenRelay's tests and demo (behaviour §9), plus a `/_control` API that injects
/// faults and per-user behaviour.
///
/// Routes (`{authority}` is `{tenant}`, `{tenant}/{policy}` or `tfp/{tenant}/{policy}` for B2C):
/// - `GET /{authority}/v2.0/.well-known/openid-configuration`
/// - `GET /{authority}/discovery/v2.0/keys`
/// - `GET /{authority}/oauth2/v2.0/authorize` (a browser gets the sign-in page, ``SignInPage``,
///   whose form posts back to `POST /{authority}/oauth2/v2.0/authorize`)
/// - `POST /{authority}/oauth2/v2.0/token`
/// - `GET /v1.0/me`; `GET|POST /v1.0/me/messages` (`$top`/`$skip` paging with an absolute
///   `@odata.nextLink`), `GET|PATCH|DELETE /v1.0/me/messages/{id}`; `POST /v1.0/me/sendMail`;
///   `POST /v1.0/$batch` (JSON batching); `GET /v1.0/users/{id}` (also with an app-only token)
/// - `GET /_control/stats`, `POST /_control/reset`, `GET|POST /_control/users/{username}`,
///   `POST /_control/users/{username}/adal-refresh-token`, `POST|DELETE /_control/faults`
///
/// Request handling is synchronous and in memory; only configured latency makes `respond(to:)`
/// wait. State sits behind one `Mutex`; time comes from the injected clock.
public final class IdentityPlatformEmulator: HTTPHandler {
    public let configuration: EmulatorConfiguration
    let clock: any EmulatorClock
    let key: SigningKey
    let state = Mutex(EmulatorState())
    private let base: Mutex<String>

    /// - Parameters:
    ///   - configuration: client, users, issuer base, rotation grace.
    ///   - clock: the time source (default: the system clock).
    /// - Throws: when the signing key cannot be generated.
    public convenience init(configuration: EmulatorConfiguration, clock: any EmulatorClock = SystemClock()) throws {
        self.init(configuration: configuration, clock: clock, signingKey: try SigningKey())
    }

    /// With a given key (tests share one: RSA key generation costs tens of milliseconds).
    init(configuration: EmulatorConfiguration, clock: any EmulatorClock, signingKey: SigningKey) {
        self.configuration = configuration
        self.clock = clock
        self.key = signingKey
        self.base = Mutex(configuration.issuerBase ?? "http://\(configuration.host):\(configuration.port)")
        if let path = configuration.recordIssuedPath {
            if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
            let file = FileHandle(forWritingAtPath: path)
            _ = try? file?.seekToEnd()
            state.withLock { $0.issued.recordFile = file }
        }
    }

    /// The scheme, host and port of every URL the emulator writes (issuers, endpoints).
    public var baseURL: String { base.withLock { $0 } }

    /// Sets the base URL once the listening port is known (when no issuer base was configured).
    public func setBaseURL(_ url: String) {
        base.withLock { $0 = url.hasSuffix("/") ? String(url.dropLast()) : url }
    }

    /// Answers discovery, keys and control requests at once; token, authorize and Graph requests
    /// go through `respond(to:)`, which may wait for injected latency.
    public func respondImmediately(to request: HTTPRequest) -> HTTPFirstStep<HTTPRequest> {
        switch Route(request) {
        case .discovery, .keys, .control, .notFound: .respond(handle(request).response)
        case .authorize, .token, .graph: .suspend(request)
        }
    }

    public func respond(to request: HTTPRequest) async -> HTTPResponse {
        let outcome = handle(request)
        if outcome.delayMilliseconds > 0 {
            try? await Task.sleep(for: .milliseconds(outcome.delayMilliseconds))
        }
        return outcome.response
    }

    /// A response and how long to hold it back (injected latency, milliseconds).
    struct Outcome {
        var response: HTTPResponse
        var delayMilliseconds = 0
    }

    /// The whole request → response function, without waiting.
    func handle(_ request: HTTPRequest) -> Outcome {
        let route = Route(request)
        switch route {
        case .discovery(let authority): return Outcome(response: discovery(authority))
        case .keys(let authority): return Outcome(response: keys(authority))
        case .authorize(let authority): return authorize(request, authority: authority)
        case .token(let authority): return token(request, authority: authority)
        case .graph(let resource): return graph(request, resource)
        case .control(let segments): return Outcome(response: control(request, segments: segments))
        case .notFound:
            return Outcome(response: Self.json(404, ["error": "not_found", "message": .string("no route for \(request.method) \(request.path)")]))
        }
    }

    // MARK: Shared helpers

    static func json(_ status: Int, _ body: JSONValue, headers: [(String, String)] = []) -> HTTPResponse {
        var h = HTTPHeaders([("Content-Type", "application/json; charset=utf-8")])
        for (name, value) in headers { h.set(name, value) }
        return HTTPResponse(status: status, headers: h, body: body.bytes)
    }

    /// An opaque random string for codes and refresh tokens.
    func opaqueToken(prefix: String) -> String {
        let bytes = SecureRandom.bytes(48)
        return prefix + Base64URLText.encode(bytes)
    }

    static func newGUID() -> String { UUID().uuidString.lowercased() }

    /// A stable GUID-shaped value derived from `seed` (service principal ids).
    static func derivedGUID(_ seed: String) -> String {
        let hex = SHA256.hash(Array(seed.utf8)).prefix(16).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        let c = Array(hex)
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-" + String(c[20..<32])
    }
}

/// The Graph resource a `/v1.0/...` request names (segments after `v1.0`), or nil when the
/// emulator has no such route for that method.
enum GraphResource: Equatable {
    case me
    /// `/v1.0/me/messages` (nil id) or `/v1.0/me/messages/{id}`.
    case messages(String?)
    /// `/v1.0/users/{id or userPrincipalName}`.
    case user(String)
    /// `POST /v1.0/me/sendMail`.
    case sendMail
    /// `POST /v1.0/$batch`.
    case batch

    init?(segments: [String], method: String) {
        switch (segments.count, segments.first, method) {
        case (1, "me", "GET"): self = .me
        case (1, "$batch", "POST"): self = .batch
        case (2, "me", "POST") where segments[1] == "sendMail": self = .sendMail
        case (2, "me", "GET"), (2, "me", "HEAD"), (2, "me", "POST"):
            guard segments[1] == "messages" else { return nil }
            self = .messages(nil)
        case (3, "me", "GET"), (3, "me", "HEAD"), (3, "me", "PATCH"), (3, "me", "DELETE"):
            guard segments[1] == "messages" else { return nil }
            self = .messages(segments[2])
        case (2, "users", "GET"): self = .user(HTTPRequest.decodedSegment(segments[1][...]))
        default: return nil
        }
    }
}

/// Where a request goes.
enum Route {
    /// The authority part of an identity-platform path.
    struct Authority {
        /// The tenant as written in the path (GUID, domain, `common`, ...).
        var tenant: String
        /// The B2C policy (user flow), when the path or `p` query names one.
        var policy: String?
    }

    case discovery(Authority)
    case keys(Authority)
    case authorize(Authority)
    case token(Authority)
    case graph(GraphResource)
    case control([String])
    case notFound

    init(_ request: HTTPRequest) {
        var segments = request.path.split(separator: "/").map(String.init)
        if segments.first == "_control" {
            self = .control(Array(segments.dropFirst()))
            return
        }
        if segments.first == "v1.0" {
            self = GraphResource(segments: Array(segments.dropFirst()), method: request.method).map(Route.graph) ?? .notFound
            return
        }
        if segments.first?.lowercased() == "tfp" { segments.removeFirst() }
        let suffixes: [([String], (Authority) -> Route)] = [
            (["v2.0", ".well-known", "openid-configuration"], Route.discovery),
            (["discovery", "v2.0", "keys"], Route.keys),
            (["oauth2", "v2.0", "authorize"], Route.authorize),
            (["oauth2", "v2.0", "token"], Route.token),
        ]
        for (suffix, make) in suffixes where segments.count > suffix.count && segments.count <= suffix.count + 2 {
            guard Array(segments.suffix(suffix.count)).map({ $0.lowercased() }) == suffix.map({ $0.lowercased() }) else { continue }
            let prefix = segments.prefix(segments.count - suffix.count)
            let policy = prefix.count == 2 ? prefix.last : request.queryValue("p")
            self = make(Authority(tenant: prefix.first!, policy: policy))
            return
        }
        self = .notFound
    }
}
