import Foundation
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

@Suite("Configuration")
struct ConfigurationTests {
    static let valid: [String: String] = [
        "TOKENRELAY_CLIENT_ID": "6731de76-14a6-49ae-97bc-6eba6914391e",
        "TOKENRELAY_AUTHORITY": "https://login.microsoftonline.com/contoso.onmicrosoft.com",
        "TOKENRELAY_DATABASE_URL": "postgresql://localhost/tokenrelay",
        "TOKENRELAY_ENCRYPTION_KEYS": "k1:" + Data(repeating: 3, count: 32).base64EncodedString(),
    ]

    @Test("Defaults follow behaviour §11")
    func defaults() throws {
        let config = try ConfigurationLoader(environment: Self.valid).load()
        #expect(config.http.listen == "127.0.0.1:8080")
        #expect(config.database.poolSize == 8)
        #expect(config.limits.requestTimeoutSeconds == 30)
        #expect(config.tokens.maxAttempts == 3)
        #expect(config.tokens.maxRetryAfterSeconds == 60)
        #expect(config.tokens.expirySkewSeconds == 300)
        #expect(config.limits.maxBodyBytes == 65536)
        #expect(config.downstream.apis["graph"]?.baseURL == "https://graph.microsoft.com/v1.0")
    }

    @Test(
        "An invalid setting stops start-up naming it",
        arguments: [
            ("TOKENRELAY_CLIENT_ID", "", "TOKENRELAY_CLIENT_ID"),
            ("TOKENRELAY_AUTHORITY", "http://login.microsoftonline.com/common", "TOKENRELAY_AUTHORITY"),
            ("TOKENRELAY_ENCRYPTION_KEYS", "k1:short", "TOKENRELAY_ENCRYPTION_KEYS"),
            ("TOKENRELAY_LISTEN", "nonsense", "TOKENRELAY_LISTEN"),
            ("TOKENRELAY_MAX_ATTEMPTS", "zero", "TOKENRELAY_MAX_ATTEMPTS"),
            ("TOKENRELAY_ALLOW_HTTP_LOOPBACK", "maybe", "TOKENRELAY_ALLOW_HTTP_LOOPBACK"),
            ("TOKENRELAY_DOWNSTREAM_APIS", #"{"graph": {"base_url": "http://example.com"}}"#, "TOKENRELAY_DOWNSTREAM_APIS"),
            ("TOKENRELAY_REQUEST_TIMEOUT_S", "500", "TOKENRELAY_REQUEST_TIMEOUT_S"),
            // An API named twice would silently keep one of its two definitions.
            (
                "TOKENRELAY_DOWNSTREAM_APIS",
                #"{"graph": {"base_url": "https://graph.microsoft.com/v1.0", "scopes": ["User.Read"]}, "graph": {"base_url": "https://evil.example", "scopes": ["User.Read"]}}"#,
                "TOKENRELAY_DOWNSTREAM_APIS"
            ),
            ("TOKENRELAY_MEMORY_CACHE_MB", "0", "TOKENRELAY_MEMORY_CACHE_MB"),
            ("TOKENRELAY_OTLP_ENDPOINT", "collector:4318", "TOKENRELAY_OTLP_ENDPOINT"),
            ("TOKENRELAY_OTLP_ENDPOINT", "http://collector:4318?token=x", "TOKENRELAY_OTLP_ENDPOINT"),
            ("TOKENRELAY_OTLP_ENDPOINT", "http://collector:4318/#x", "TOKENRELAY_OTLP_ENDPOINT"),
            ("TOKENRELAY_OTLP_ENDPOINT", "http://collector:4318/v1/traces", "TOKENRELAY_OTLP_ENDPOINT"),
            ("TOKENRELAY_OTLP_ENDPOINT", "http://collector:99999", "TOKENRELAY_OTLP_ENDPOINT"),
            ("TOKENRELAY_OTLP_ENDPOINT", "http://collector%0d%0aX:4318", "TOKENRELAY_OTLP_ENDPOINT"),
            ("TOKENRELAY_OTLP_ENDPOINT", "ftp://collector:4318", "TOKENRELAY_OTLP_ENDPOINT"),
            ("TOKENRELAY_OTLP_QUEUE_SPANS", "0", "TOKENRELAY_OTLP_QUEUE_SPANS"),
            ("TOKENRELAY_OTLP_INTERVAL_MS", "10", "TOKENRELAY_OTLP_INTERVAL_MS"),
        ])
    func invalid(name: String, value: String, setting: String) {
        var environment = Self.valid
        environment[name] = value
        do {
            _ = try ConfigurationLoader(environment: environment).load()
            Issue.record("accepted \(name)=\(value)")
        } catch let error as ConfigurationError {
            #expect(error.setting == setting)
            #expect(!error.description.contains(Self.valid["TOKENRELAY_ENCRYPTION_KEYS"]!))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test("Secrets are read from NAME_FILE; the environment overrides the JSON file")
    func filesAndPrecedence() throws {
        let directory = NSTemporaryDirectory() + "tokenrelay-config-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "from-file-secret\n".write(toFile: directory + "/secret", atomically: true, encoding: .utf8)
        try #"{"max_attempts": 5, "expiry_skew_s": 120, "client_capabilities": ["cp1"]}"#.write(
            toFile: directory + "/config.json", atomically: true, encoding: .utf8)
        var environment = Self.valid
        environment["TOKENRELAY_CLIENT_SECRET_FILE"] = directory + "/secret"
        environment["TOKENRELAY_CONFIG"] = directory + "/config.json"
        environment["TOKENRELAY_EXPIRY_SKEW_S"] = "60"
        let config = try ConfigurationLoader(environment: environment).load()
        #expect(config.credential.secret == "from-file-secret")
        #expect(config.tokens.maxAttempts == 5)
        #expect(config.tokens.expirySkewSeconds == 60)
        #expect(config.identity.clientCapabilities == ["cp1"])
    }

    @Test("A settings file naming a setting twice stops start-up naming the file and the setting")
    func duplicateSettingInFile() throws {
        let directory = NSTemporaryDirectory() + "tokenrelay-config-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try #"{"max_attempts": 5, "max_attempts": 1}"#.write(toFile: directory + "/config.json", atomically: true, encoding: .utf8)
        var environment = Self.valid
        environment["TOKENRELAY_CONFIG"] = directory + "/config.json"
        #expect {
            _ = try ConfigurationLoader(environment: environment).load()
        } throws: { error in
            (error as? ConfigurationError).map { $0.setting == "TOKENRELAY_CONFIG" && $0.description.contains("max_attempts") } ?? false
        }
    }

    @Test("TOKENRELAY_MEMORY_CACHE_MB is read in MiB (default 64)")
    func memoryCacheSetting() throws {
        #expect(try ConfigurationLoader(environment: Self.valid).load().tokens.memoryCacheMegabytes == 64)
        var environment = Self.valid
        environment["TOKENRELAY_MEMORY_CACHE_MB"] = "150"
        #expect(try ConfigurationLoader(environment: environment).load().tokens.memoryCacheMegabytes == 150)
    }

    @Test("Traces are off unless TOKENRELAY_OTLP_ENDPOINT is set; its companions have defaults")
    func tracingSettings() throws {
        let defaults = try ConfigurationLoader(environment: Self.valid).load().tracing
        #expect(defaults.endpoint == nil && defaults.serviceName == "token-relay" && defaults.queueSpans == 2048 && defaults.intervalMilliseconds == 5000)
        var environment = Self.valid
        environment["TOKENRELAY_OTLP_ENDPOINT"] = "http://otel-collector.observability:4318/"
        environment["TOKENRELAY_OTLP_SERVICE_NAME"] = "relay-eu"
        let tracing = try ConfigurationLoader(environment: environment).load().tracing
        #expect(tracing.endpoint.map(OTLPTraceExporter.tracesURL) == "http://otel-collector.observability:4318/v1/traces")
        #expect(tracing.serviceName == "relay-eu")
        // URL schemes are case-insensitive (RFC 3986 §3.1).
        environment["TOKENRELAY_OTLP_ENDPOINT"] = "HTTPS://collector.example/otlp"
        #expect(try ConfigurationLoader(environment: environment).load().tracing.endpoint == "HTTPS://collector.example/otlp")
    }
}
