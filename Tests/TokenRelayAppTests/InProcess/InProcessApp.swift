import Foundation
import HTTPClientBridge
import HTTPCommon
import HTTPServerBridge
import PostgresBridge
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore
import TokenRelayTesting

@testable import STSEmulator

/// TokenRelay in this process for route-level tests: a fresh database with the migrations
/// applied, the identity-platform emulator on a loopback port (it is the STS, not our app), and
/// ``AppDependencies/test(databaseURL:authority:clientId:clientSecret:logger:configure:)``.
/// Nothing listens on TokenRelay's side: each request is an `HTTPRequest` handed to the handler
/// through ``answer(_:by:)``, as `HTTPServer` hands it over.
///
/// Shaped like ``TokenRelayStack`` (the live mode, for what crosses processes: signals,
/// replicas, outages, exit codes, sockets), so a suite moves between the two by changing its
/// constructor. What is not here: the HTTP server (connection limits, TLS, head timeouts, the
/// body limit beyond the flag ``answer(_:by:)`` sets) and the `ServiceGroup`'s services (the
/// invalidation listener, the keep-alive and webhook jobs, the issuance flush).
///
/// Logs (debug level, as the live stack's) go to `tokenrelay-test-inprocess-<name>-<id>.log` in
/// ``TestLogs/directory``, and the secrets used or issued are recorded there, so
/// `scripts/scan-test-logs` checks this mode too.
final class InProcessApp: Sendable {
    /// The origin of every URL TokenRelay writes (redirect URI, sign-in links); requests to it are
    /// answered in process.
    static let baseURL = "http://tokenrelay.test"
    static let clientId = TokenRelayStack.clientId
    /// Test-only credentials, generated per app; never a real secret.
    let clientSecret: String
    /// The bootstrap admin API key (every permission).
    let apiKey: String
    /// The key id of ``apiKey`` (`trk_<keyid>_<secret>`, the bootstrap key).
    var apiKeyId: String { String(apiKey.split(separator: "_")[1]) }
    let databaseURL: String
    let tenantId = "11111111-1111-1111-1111-111111111111"
    /// The emulator, listening on loopback (`emulator.baseURL`).
    let emulator: EmulatorServer
    let dependencies: AppDependencies
    /// For the emulator only (authorize, `/_control`).
    let http = HTTPClient()
    private let secretsFile: String

    var baseURL: String { Self.baseURL }

    /// One emulator key for the process: RSA-2048 generation is most of an emulator's start.
    private static let signingKey = Result { try SigningKey() }

    /// Builds everything; `configure` changes the configuration last (e.g. `$0.limits.rateLimitPerKey = 2`).
    /// - Parameters:
    ///   - name: names the database and the log file (letters, digits, `_`).
    ///   - clock: TokenRelay's clock (a `TestClock`'s to age tokens and memories without
    ///     sleeping); the emulator keeps the system's. Default the system's.
    /// - Throws: when the database, the emulator or the configuration cannot be set up.
    init(name: String, clock: RelayClock = .system, configure: (inout Configuration) -> Void = { _ in }) async throws {
        let clientSecret = "test-secret-" + UUID().uuidString
        let apiKey = "trk_bootstrap0_" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        self.clientSecret = clientSecret
        self.apiKey = apiKey
        let stem = "\(name)-\(UUID().uuidString.prefix(8))"
        secretsFile = "inprocess-" + stem
        databaseURL = try await TestPostgres.freshDatabase(named: name)

        var emulatorConfiguration = EmulatorConfiguration()
        emulatorConfiguration.clientID = Self.clientId
        emulatorConfiguration.clientSecret = clientSecret
        if TestLogs.recordsSecrets { emulatorConfiguration.recordIssuedPath = TestLogs.directory + "/" + secretsFile + ".issued" }
        let emulator = EmulatorServer(configuration: emulatorConfiguration, clock: SystemClock(), signingKey: try Self.signingKey.get())
        try emulator.start()
        self.emulator = emulator

        let logPath = TestLogs.directory + "/tokenrelay-test-inprocess-\(stem).log"
        let logger = Logger(level: .debug, logPII: false, sink: LogSink.file(logPath) ?? .memory())
        let emulatorURL = emulator.baseURL
        do {
            dependencies = try AppDependencies.test(
                databaseURL: databaseURL, authority: "\(emulatorURL)/\(tenantId)", clientId: Self.clientId, clientSecret: clientSecret,
                logger: logger, clock: clock,
                configure: {
                    $0.http.publicBaseURL = Self.baseURL
                    $0.database.migrationsDirectory = BuiltProducts.packageRoot() + "/migrations"
                    $0.apiKeys.bootstrapKey = apiKey
                    $0.downstream.apis = [
                        "graph": DownstreamAPI(baseURL: emulatorURL + "/v1.0", scopes: ["User.Read"], appScopes: ["https://graph.microsoft.com/.default"])
                    ]
                    configure(&$0)
                })
        } catch {
            emulator.stop()
            throw error
        }
        let ring = dependencies.configuration.encryption.keys.split(separator: ",").compactMap { $0.split(separator: ":", maxSplits: 1).last }
        TestLogs.record([clientSecret, apiKey] + ring.map(String.init), in: secretsFile)
        do {
            guard let migrator = dependencies.migrator else { throw TestFailure("no migrations directory") }
            _ = try await migrator.apply(on: dependencies.pool)
        } catch {
            stop()
            throw error
        }
    }

    /// The harness's one call into TokenRelay, made as `HTTPServer` makes it: the immediate step
    /// (the server's polling thread), then, when that declines, the suspended one (a `Task`).
    /// Only this function knows the ``HTTPHandler`` protocol's shape.
    static func answer(_ request: HTTPRequest, by handler: some HTTPHandler) async -> HTTPResponse {
        switch handler.respondImmediately(to: request) {
        case .respond(let response): return response
        case .suspend(let prepared): return await handler.respond(to: prepared)
        }
    }

    /// Sends a request to TokenRelay in process. `body` is JSON-encoded when given; the bootstrap
    /// API key is sent unless `authenticated` is false.
    /// - Parameter path: `/v1/...` with an optional query, or a URL under ``baseURL`` (a redirect's `Location`).
    func request(
        _ method: String, _ path: String, json body: Any? = nil, headers extra: [String: String] = [:], authenticated: Bool = true
    ) async throws -> TestResponse {
        var headers: [String: String] = [:]
        var bytes: [UInt8] = []
        if let body {
            headers["Content-Type"] = "application/json"
            bytes = Array(try JSONSerialization.data(withJSONObject: body))
        }
        for (name, value) in extra { headers[name] = value }
        return try await request(method, path, body: bytes, headers: headers, authenticated: authenticated)
    }

    /// Sends `body` as it is (e.g. JSON that does not parse, or one over the size limit).
    /// - Parameter repeated: header fields added after the others, each as its own field, so a
    ///   name may appear twice (as on the wire).
    func request(
        _ method: String, _ path: String, body: [UInt8], headers extra: [String: String] = [:], repeated: [(String, String)] = [],
        authenticated: Bool = true
    ) async throws -> TestResponse {
        var target = path
        if target.hasPrefix("http") {
            guard target.hasPrefix(Self.baseURL + "/") else { throw TestFailure("\(path) is not TokenRelay's (\(Self.baseURL))") }
            target.removeFirst(Self.baseURL.count)
        }
        var headers = HTTPHeaders([("Host", String(Self.baseURL.dropFirst("http://".count)))])
        if authenticated { headers.add("Authorization", "Bearer \(apiKey)") }
        if !body.isEmpty { headers.add("Content-Length", String(body.count)) }
        for (name, value) in extra { headers.set(name, value) }
        for (name, value) in repeated { headers.add(name, value) }
        var request = Self.parse(method: method, target: target, headers: headers)
        // The server reads at most `maxBodyBytes` and tells the handler it stopped (behaviour §12 Limits).
        if body.count > dependencies.configuration.limits.maxBodyBytes {
            request.bodyExceededLimit = true
        } else {
            request.body = body
        }
        let response = await Self.answer(request, by: dependencies.handler)
        return TestResponse(status: response.status, headers: response.sentHeaders, body: response.body)
    }

    /// The request `HTTPServer` would build for `target` (origin form): the path and the query's
    /// names and values percent-decoded, `+` a space in the query, `%2F`, `%25` and `%00` kept in
    /// the path.
    static func parse(method: String, target: String, headers: HTTPHeaders) -> HTTPRequest {
        let (path, queryText) =
            target.firstIndex(of: "?").map { (String(target[..<$0]), String(target[target.index(after: $0)...])) } ?? (target, "")
        var query: [(name: String, value: String)] = []
        for pair in queryText.split(separator: "&") {
            let (name, value) = pair.firstIndex(of: "=").map { (pair[..<$0], pair[pair.index(after: $0)...]) } ?? (pair[...], ""[...])
            func decoded(_ text: Substring) -> String { percentDecoded(text.replacingOccurrences(of: "+", with: " "), keepingEscapes: false) }
            query.append((decoded(name), decoded(value)))
        }
        return HTTPRequest(
            method: method, path: percentDecoded(path, keepingEscapes: true), query: query, headers: headers, remoteAddress: "127.0.0.1")
    }

    /// `%XX` decoded, invalid escapes left as they are (like the server's unescape callback).
    private static func percentDecoded(_ text: String, keepingEscapes: Bool) -> String {
        func hexValue(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        let bytes = Array(text.utf8)
        var output: [UInt8] = []
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count, let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]),
                !keepingEscapes || !HTTPRequest.pathKeepsEscaped(high << 4 | low)
            {
                let value = high << 4 | low
                output.append(value)
                index += 3
            } else {
                output.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Signs `username` in as a browser would: TokenRelay's `POST /v1/sign-ins` (in process), the
    /// emulator's authorize URL (over loopback), then TokenRelay's callback (in process).
    /// - Returns: the callback's JSON (`{"account": {...}}`).
    func signIn(_ username: String, scopes: [String] = ["User.Read"]) async throws -> [String: Any] {
        try await signInThroughBrowser(username, scopes: scopes)
    }

    /// Signs `username` in and returns the new account's `account_id`.
    func signInAccountId(_ username: String = "alice@contoso.example") async throws -> String {
        guard let account = try await signIn(username)["account"] as? [String: Any], let id = account["account_id"] as? String else {
            throw TestFailure("the sign-in answered no account_id")
        }
        return id
    }

    /// Creates an API key as `token-relay api-keys create` does (the same call, without the process).
    /// - Returns: the key (recorded for the log scan) and its id.
    func createKey(name: String = "test", permissions: [String], tenants: [String] = [], scopes: [String] = []) async throws -> (key: String, keyId: String) {
        let parsed = try permissions.map { text in
            guard let permission = Permission(rawValue: text) else { throw TestFailure("unknown permission \(text)") }
            return permission
        }
        let created = try await APIKeyAuthenticator.create(name: name, permissions: parsed, tenants: tenants, scopePatterns: scopes, store: keyStore)
        // Its notification reaches this process's key directory too, a moment later: no waiting.
        dependencies.authenticator.keyCreated(created.keyId)
        TestLogs.record([created.apiKey], in: secretsFile)
        return (created.apiKey, created.keyId)
    }

    /// Revokes a key as `token-relay api-keys revoke` does. Returns whether it existed.
    func revokeKey(_ keyId: String) async throws -> Bool {
        try await keyStore.revoke(keyId)
    }

    /// Every stored key, as `token-relay api-keys list` reads them.
    func apiKeys() async throws -> [APIKeyRecord] {
        try await keyStore.all()
    }

    private var keyStore: APIKeyStore { APIKeyStore(database: Database(pool: dependencies.pool)) }

    /// Sends a JSON control request to the emulator (`/_control/...`, or any emulator path).
    func control(_ method: String, _ path: String, json body: Any? = nil) async throws -> TestResponse {
        var bytes: [UInt8]?
        if let body { bytes = Array(try JSONSerialization.data(withJSONObject: body)) }
        let response = try await http.execute(
            HTTPClientRequest(method: method, url: emulator.baseURL + path, headers: ["Content-Type": "application/json"], body: bytes))
        return TestResponse(status: response.status, headers: response.headers, body: response.body)
    }

    /// A counter of the emulator's `/_control/stats`, e.g. `token_requests` (STS calls made).
    func emulatorCount(_ name: String = "token_requests") async throws -> Int {
        guard let value = try await control("GET", "/_control/stats").json[name] as? Int else {
            throw TestFailure("the emulator's stats have no counter \(name)")
        }
        return value
    }

    /// An ADAL-era refresh token the emulator mints for `username` (for `POST /v1/accounts/import`).
    func adalRefreshToken(for username: String) async throws -> String {
        guard let token = try await control("POST", "/_control/users/\(username)/adal-refresh-token").json["refresh_token"] as? String else {
            throw TestFailure("the emulator minted no ADAL refresh token for \(username)")
        }
        return token
    }

    /// Runs `body` on a connection of its own to this app's database (to look at or break what is stored).
    func withDatabase<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        try await TestPostgres.withConnection(url: databaseURL, body)
    }

    /// Closes the pool and the clients and stops the emulator. The database stays, as a live
    /// stack's does (``TestPostgres`` drops stale ones).
    func stop() {
        dependencies.close()
        emulator.stop()
        http.shutdown()
    }
}

extension InProcessApp: TokenRelayTestClient {
    var emulatorBaseURL: String { emulator.baseURL }
    var browser: HTTPClient { http }
}
