import Foundation
import HTTPServerBridge

/// The emulator on a real HTTP server: the executable and the live-server tests use it.
public final class EmulatorServer: Sendable {
    public let emulator: IdentityPlatformEmulator
    private let server: HTTPServer

    /// Creates the emulator and its server; nothing listens until `start()`.
    /// - Throws: when the signing key cannot be generated.
    public convenience init(configuration: EmulatorConfiguration, clock: any EmulatorClock = SystemClock()) throws {
        self.init(configuration: configuration, clock: clock, signingKey: try SigningKey())
    }

    /// With a given key (in-process tests share one: RSA key generation costs up to half a second).
    init(configuration: EmulatorConfiguration, clock: any EmulatorClock, signingKey: SigningKey) {
        emulator = IdentityPlatformEmulator(configuration: configuration, clock: clock, signingKey: signingKey)
        server = HTTPServer(
            configuration: HTTPServerConfiguration(
                host: configuration.host, port: configuration.port, threadCount: configuration.threadCount, maxBodyBytes: 1 << 20,
                maxConnections: 1024, connectionTimeoutSeconds: 30),
            handler: emulator)
    }

    /// Starts listening and, without a configured issuer base, fixes the base URL to the bound port.
    /// - Throws: the server's start error (port in use, bad address).
    public func start() throws {
        try server.start()
        if emulator.configuration.issuerBase == nil {
            let host = emulator.configuration.host.contains(":") ? "[\(emulator.configuration.host)]" : emulator.configuration.host
            emulator.setBaseURL("http://\(host):\(server.port)")
        }
    }

    /// The bound port (meaningful after `start()`).
    public var port: Int { server.port }

    /// `http://host:port`.
    public var baseURL: String { emulator.baseURL }

    /// The one JSON line the executable prints once listening:
    /// `{"event":"listening","base_url":"http://127.0.0.1:PORT","port":PORT}`.
    public var listeningLine: String {
        JSONValue.object([("event", "listening"), ("base_url", .string(baseURL)), ("port", .int(port))]).serialized
    }

    public func stop() { server.stop() }
}
