import Foundation
import HTTPClientBridge
import HTTPCommon
import PostgresBridge
import Synchronization

/// The whole system on real parts for end-to-end tests: a fresh PostgreSQL database, the built
/// `sts-emulator`, `token-relay migrate`, and the built `token-relay serve` on a free port.
public final class TokenRelayStack: Sendable {
    public static let clientId = "6731de76-14a6-49ae-97bc-6eba6914391e"
    /// Test-only credentials, generated per stack; never a real secret.
    public let clientSecret: String
    public let apiKey: String
    /// The key id of ``apiKey`` (`trk_<keyid>_<secret>`, the bootstrap key): how audit rows,
    /// issuance counts and the access log name its requests.
    public var apiKeyId: String { String(apiKey.split(separator: "_")[1]) }
    public let databaseURL: String
    public let emulator: ManagedProcess
    /// The running `token-relay serve` (a new one after ``restartRelay(environment:)``).
    public var relay: ManagedProcess { relayState.withLock { $0.process } }
    private let relayState: Mutex<(process: ManagedProcess, environment: [String: String])>
    /// The name secrets of this stack are recorded under (see ``TestLogs``).
    private let secretsFile: String
    public let http = HTTPClient()
    public let tenantId = "11111111-1111-1111-1111-111111111111"
    /// The environment `token-relay serve` runs with, for running other sub-commands against the same stack.
    public var environment: [String: String] { relayEnvironment }

    /// Starts everything. `environment` adds or overrides `TOKENRELAY_*` settings; `databaseURL`
    /// replaces the fresh database on the shared test server (e.g. a ``PrivatePostgres``).
    public init(
        name: String, environment extra: [String: String] = [:], emulatorArguments: [String] = [], databaseURL: String? = nil
    ) async throws {
        clientSecret = "test-secret-" + UUID().uuidString
        apiKey = "trk_bootstrap0_" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        if let databaseURL {
            self.databaseURL = databaseURL
        } else {
            self.databaseURL = try await TestPostgres.freshDatabase(named: name)
        }
        secretsFile = "\(name)-\(UUID().uuidString.prefix(8))"
        let recording = TestLogs.recordsSecrets ? ["--record-issued", TestLogs.directory + "/" + secretsFile + ".issued"] : []
        emulator = try await ManagedProcess.start(
            executable: BuiltProducts.path("sts-emulator"),
            arguments: ["--host", "127.0.0.1", "--port", "0", "--client-id", Self.clientId, "--client-secret", clientSecret] + recording
                + emulatorArguments,
            environment: ProcessInfo.processInfo.environment)
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("TOKENRELAY_") }
        environment["TOKENRELAY_LISTEN"] = "127.0.0.1:0"
        environment["TOKENRELAY_DATABASE_URL"] = self.databaseURL
        environment["TOKENRELAY_DATABASE_POOL_SIZE"] = "4"
        environment["TOKENRELAY_CLIENT_ID"] = Self.clientId
        environment["TOKENRELAY_CLIENT_SECRET"] = clientSecret
        environment["TOKENRELAY_AUTHORITY"] = "\(emulator.baseURL)/\(tenantId)"
        environment["TOKENRELAY_KNOWN_AUTHORITIES"] = emulator.baseURL
        environment["TOKENRELAY_ALLOW_HTTP_LOOPBACK"] = "true"
        environment["TOKENRELAY_ENCRYPTION_KEYS"] = "test1:" + Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        environment["TOKENRELAY_BOOTSTRAP_API_KEY"] = apiKey
        environment["TOKENRELAY_DOWNSTREAM_APIS"] =
            #"{"graph": {"base_url": "\#(emulator.baseURL)/v1.0", "scopes": ["User.Read"], "app_scopes": ["https://graph.microsoft.com/.default"]}}"#
        environment["TOKENRELAY_MIGRATIONS_DIR"] = BuiltProducts.packageRoot() + "/migrations"
        environment["TOKENRELAY_MIGRATE_ON_START"] = "true"
        environment["TOKENRELAY_LOG_LEVEL"] = "debug"
        for (key, value) in extra { environment[key] = value }
        Self.recordSecrets(of: environment, in: secretsFile)
        let relay = try await ManagedProcess.start(executable: BuiltProducts.path("token-relay"), arguments: ["serve"], environment: environment)
        relayState = Mutex((relay, environment))
    }

    /// The `token-relay serve` environment now in use (`TOKENRELAY_*` and the inherited rest).
    public var relayEnvironment: [String: String] { relayState.withLock { $0.environment } }

    /// Stops `token-relay serve` and starts it again with `environment` changed (e.g. another
    /// key ring), on a new port; the database and the emulator stay.
    public func restartRelay(environment changes: [String: String]) async throws {
        var environment = relayEnvironment
        for (key, value) in changes { environment[key] = value }
        Self.recordSecrets(of: environment, in: secretsFile)
        await relay.stopAndWait()
        let started = try await ManagedProcess.start(executable: BuiltProducts.path("token-relay"), arguments: ["serve"], environment: environment)
        relayState.withLock { $0 = (started, environment) }
    }

    /// Runs the built `token-relay` with `arguments` in the service's environment (plus
    /// `changes`); its standard error goes to the log directory too.
    /// - Returns: the exit status and standard output.
    public func runCommand(_ arguments: [String], environment changes: [String: String] = [:]) async throws -> (status: Int32, output: String) {
        var environment = relayEnvironment
        for (key, value) in changes { environment[key] = value }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: BuiltProducts.path("token-relay"))
        process.arguments = arguments
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        let logPath = TestLogs.directory + "/tokenrelay-test-cli-\(arguments.first ?? "")-\(UUID().uuidString.prefix(8)).log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: logPath)
        try process.runRetryingDescriptorRace()
        // Read until EOF on a thread of its own (never a task-pool thread), then reap the child.
        let data: Data = await onOwnThread {
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return data
        }
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// Records the secret settings of a relay environment for the log scan (never printed).
    private static func recordSecrets(of environment: [String: String], in file: String) {
        var secrets = [environment["TOKENRELAY_CLIENT_SECRET"], environment["TOKENRELAY_BOOTSTRAP_API_KEY"]].compactMap { $0 }
        for entry in (environment["TOKENRELAY_ENCRYPTION_KEYS"] ?? "").split(separator: ",") {
            if let colon = entry.firstIndex(of: ":") { secrets.append(String(entry[entry.index(after: colon)...])) }
        }
        // The secrets of a credential list (TOKENRELAY_CLIENT_CREDENTIALS).
        if let list = environment["TOKENRELAY_CLIENT_CREDENTIALS"],
            let entries = try? JSONSerialization.jsonObject(with: Data(list.utf8)) as? [[String: Any]]
        {
            secrets += entries.compactMap { $0["secret"] as? String }
        }
        TestLogs.record(secrets, in: file)
    }

    /// Every token and code the emulator handed out in this stack (`GET /_control/issued`).
    public func issuedSecrets() async throws -> (accessTokens: [String], refreshTokens: [String], idTokens: [String], codes: [String]) {
        let json = try await control("GET", "/_control/issued").json
        func list(_ name: String) -> [String] { json[name] as? [String] ?? [] }
        return (list("access_tokens"), list("refresh_tokens"), list("id_tokens"), list("codes"))
    }

    public var baseURL: String { relay.baseURL }

    /// Starts one more `token-relay serve` on the same database, emulator and settings (another
    /// replica), with `extra` settings on top. The caller stops it.
    public func startReplica(environment extra: [String: String] = [:]) async throws -> ManagedProcess {
        var environment = relayEnvironment
        environment["TOKENRELAY_MIGRATE_ON_START"] = "false"
        for (key, value) in extra { environment[key] = value }
        return try await ManagedProcess.start(executable: BuiltProducts.path("token-relay"), arguments: ["serve"], environment: environment)
    }

    /// Sends a request to TokenRelay. `body` is JSON-encoded when given; the API key is sent unless `authenticated` is false.
    public func request(
        _ method: String, _ path: String, json body: Any? = nil, headers extra: [String: String] = [:], authenticated: Bool = true
    ) async throws -> TestResponse {
        var headers = HTTPHeaders()
        if authenticated { headers.add("Authorization", "Bearer \(apiKey)") }
        var bytes: [UInt8]?
        if let body {
            headers.add("Content-Type", "application/json")
            bytes = Array(try JSONSerialization.data(withJSONObject: body))
        }
        for (name, value) in extra { headers.set(name, value) }
        let url = path.hasPrefix("http") ? path : baseURL + path
        let response = try await http.execute(HTTPClientRequest(method: method, url: url, headers: headers, body: bytes, timeout: 30))
        return TestResponse(response)
    }

    /// Sends `raw` as the body, byte for byte (a body JSON encoding cannot make: nested past a
    /// parser's depth, or not JSON at all); `headers` give its `Content-Type`.
    public func request(
        _ method: String, _ path: String, headers extra: [String: String] = [:], raw bytes: [UInt8], authenticated: Bool = true
    ) async throws -> TestResponse {
        var headers = HTTPHeaders()
        if authenticated { headers.add("Authorization", "Bearer \(apiKey)") }
        for (name, value) in extra { headers.set(name, value) }
        let response = try await http.execute(HTTPClientRequest(method: method, url: baseURL + path, headers: headers, body: bytes, timeout: 30))
        return TestResponse(response)
    }

    /// Signs `username` in through the emulator's authorize endpoint and TokenRelay's callback,
    /// as a browser would (``TokenRelayTestClient/signInThroughBrowser(_:scopes:authority:on:)``).
    /// Returns the callback's JSON (`{"account": {...}}`).
    /// - Parameter replica: the base URL of the replica to sign in on (its callback comes back to
    ///   it); default ``baseURL``.
    public func signIn(_ username: String, scopes: [String] = ["User.Read"], on replica: String? = nil) async throws -> [String: Any] {
        try await signInThroughBrowser(username, scopes: scopes, on: replica)
    }

    /// Signs `username` in (on `replica`, default ``baseURL``) and returns the new account's `account_id`.
    public func signInAccountId(_ username: String = "alice@contoso.example", on replica: String? = nil) async throws -> String {
        guard let account = try await signIn(username, on: replica)["account"] as? [String: Any], let id = account["account_id"] as? String else {
            throw TestFailure("the sign-in answered no account_id")
        }
        return id
    }

    /// A counter of the emulator's `/_control/stats`, e.g. `token_requests` (STS calls made).
    public func emulatorCount(_ name: String = "token_requests") async throws -> Int {
        guard let value = try await control("GET", "/_control/stats").json[name] as? Int else {
            throw TestFailure("the emulator's stats have no counter \(name)")
        }
        return value
    }

    /// An ADAL-era refresh token the emulator mints for `username` (for `POST /v1/accounts/import`).
    public func adalRefreshToken(for username: String) async throws -> String {
        guard let token = try await control("POST", "/_control/users/\(username)/adal-refresh-token").json["refresh_token"] as? String else {
            throw TestFailure("the emulator minted no ADAL refresh token for \(username)")
        }
        return token
    }

    /// Runs `body` on a connection to this stack's database (to look at or break what is stored).
    @discardableResult
    public func withDatabase<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        try await TestPostgres.withConnection(url: databaseURL, body)
    }

    /// Sends a JSON control request to the emulator (`/_control/...`).
    public func control(_ method: String, _ path: String, json body: Any? = nil) async throws -> TestResponse {
        var bytes: [UInt8]?
        if let body { bytes = Array(try JSONSerialization.data(withJSONObject: body)) }
        let response = try await http.execute(
            HTTPClientRequest(method: method, url: emulator.baseURL + path, headers: ["Content-Type": "application/json"], body: bytes))
        return TestResponse(response)
    }

    /// Stops the relay and the emulator without waiting for them to exit (see
    /// ``ManagedProcess/stop(graceSeconds:)``: a test's `defer` cannot await).
    public func stop() {
        relay.stop()
        emulator.stop()
        http.shutdown()
    }
}

/// An answer with its body read as JSON when it is JSON.
public struct TestResponse: Sendable {
    public let status: Int
    public let headers: HTTPHeaders
    public let body: [UInt8]

    public init(_ response: HTTPClientResponse) {
        status = response.status
        headers = response.headers
        body = response.body
    }

    /// An answer that came from somewhere other than the HTTP client (an in-process handler).
    public init(status: Int, headers: HTTPHeaders, body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public var text: String { String(decoding: body, as: UTF8.self) }

    /// The body as a JSON object, or empty.
    public var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }
}

public struct TestFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension TokenRelayStack: TokenRelayTestClient {
    public var emulatorBaseURL: String { emulator.baseURL }
    public var browser: HTTPClient { http }
}
