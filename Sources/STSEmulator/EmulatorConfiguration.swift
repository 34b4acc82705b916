import CryptoBridge
import Foundation

/// A configuration problem found at start-up; its message is safe to print.
public struct EmulatorConfigurationError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// How the emulator is started.
///
/// Command line: `sts-emulator --host 127.0.0.1 --port 0 --client-id ID --client-secret SECRET
/// [--users FILE.json] [--issuer-base URL] [--rotation-grace-seconds 2] [--threads 2]
/// [--client-certificate CERT.pem] [--record-issued FILE] [--scale-users N --scale-refresh-key K]`.
/// Each option falls back to an environment variable: `STS_EMULATOR_HOST`, `STS_EMULATOR_PORT`,
/// `STS_EMULATOR_CLIENT_ID`, `STS_EMULATOR_CLIENT_SECRET`, `STS_EMULATOR_USERS`,
/// `STS_EMULATOR_ISSUER_BASE`, `STS_EMULATOR_ROTATION_GRACE_SECONDS`, `STS_EMULATOR_THREADS`,
/// `STS_EMULATOR_CLIENT_CERTIFICATE`, `STS_EMULATOR_SCALE_USERS`, `STS_EMULATOR_SCALE_REFRESH_KEY`.
public struct EmulatorConfiguration: Sendable {
    /// Listening address. Default `127.0.0.1`.
    public var host: String = "127.0.0.1"
    /// Listening port; 0 picks a free one. Default 0.
    public var port: Int = 0
    /// The one registered application's client id. Default `00000000-0000-4000-8000-00000000c1e7`.
    public var clientID: String = "00000000-0000-4000-8000-00000000c1e7"
    /// The application's client secret. Default `emulator-secret`.
    public var clientSecret: String = "emulator-secret"
    /// A certificate registered for the application: client assertions signed by its key are
    /// accepted besides the secret. Default none.
    public var clientCertificate: X509Certificate?
    /// The scheme, host and port that issuers and endpoints in discovery use (no trailing
    /// slash). Default nil: `http://{host}:{bound port}` once the server listens.
    public var issuerBase: String?
    /// How long a superseded refresh token is still accepted (seconds). Default 2.
    public var rotationGraceSeconds: Double = 2
    /// HTTP server threads. Default 2.
    public var threadCount: Int = 2
    /// Tenants and users. Default `Directory.default`.
    public var directory: Directory = .default
    /// Access-token lifetime when no per-user value is set (seconds). Default 3600.
    public var defaultExpiresIn: Int = 3600
    /// Authorization-code lifetime (seconds). Default 600 (ten minutes, as the platform).
    public var codeLifetimeSeconds: Double = 600
    /// A file to which every token and code handed out is appended, one per line (tests scan
    /// logs and dumps for them). Default nil: nothing is written.
    public var recordIssuedPath: String?

    public init() {}

    /// Reads the command line, then the environment for options not given.
    /// - Parameters:
    ///   - arguments: the arguments without the program name.
    ///   - environment: usually `ProcessInfo.processInfo.environment`.
    /// - Throws: `EmulatorConfigurationError` for an unknown option, a bad value or an unreadable
    ///   users file.
    public static func parse(arguments: [String], environment: [String: String]) throws -> EmulatorConfiguration {
        var options: [String: String] = [:]
        var index = 0
        let known = [
            "host", "port", "client-id", "client-secret", "users", "issuer-base", "rotation-grace-seconds", "threads", "client-certificate",
            "record-issued", "scale-users", "scale-refresh-key",
        ]
        while index < arguments.count {
            let argument = arguments[index]
            guard argument.hasPrefix("--") else { throw EmulatorConfigurationError("unexpected argument \(argument)") }
            var name = String(argument.dropFirst(2))
            var value: String
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            } else {
                guard index + 1 < arguments.count else { throw EmulatorConfigurationError("option --\(name) needs a value") }
                index += 1
                value = arguments[index]
            }
            guard known.contains(name) else { throw EmulatorConfigurationError("unknown option --\(name)") }
            options[name] = value
            index += 1
        }
        func option(_ name: String) -> String? {
            options[name] ?? environment["STS_EMULATOR_" + name.uppercased().replacingOccurrences(of: "-", with: "_")]
        }
        var configuration = EmulatorConfiguration()
        if let host = option("host") { configuration.host = host }
        if let port = option("port") {
            guard let value = Int(port), (0...65535).contains(value) else { throw EmulatorConfigurationError("bad port \(port)") }
            configuration.port = value
        }
        if let clientID = option("client-id") { configuration.clientID = clientID }
        if let secret = option("client-secret") { configuration.clientSecret = secret }
        if let base = option("issuer-base") {
            configuration.issuerBase = base.hasSuffix("/") ? String(base.dropLast()) : base
        }
        if let grace = option("rotation-grace-seconds") {
            guard let value = Double(grace), value >= 0 else { throw EmulatorConfigurationError("bad rotation grace \(grace)") }
            configuration.rotationGraceSeconds = value
        }
        if let threads = option("threads") {
            guard let value = Int(threads), value > 0 else { throw EmulatorConfigurationError("bad thread count \(threads)") }
            configuration.threadCount = value
        }
        if let path = option("client-certificate") {
            guard let pem = try? String(contentsOfFile: path, encoding: .utf8), let certificate = try? X509Certificate(pem: pem) else {
                throw EmulatorConfigurationError("cannot read a certificate from \(path)")
            }
            configuration.clientCertificate = certificate
        }
        configuration.recordIssuedPath = option("record-issued")
        if let path = option("users") {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw EmulatorConfigurationError("cannot read users file \(path)")
            }
            configuration.directory = try Directory.decode(Array(data))
        }
        if let users = option("scale-users") {
            guard let count = Int(users), count >= 0 else { throw EmulatorConfigurationError("bad --scale-users \(users)") }
            guard let key = option("scale-refresh-key"), !key.isEmpty else {
                throw EmulatorConfigurationError("--scale-users needs --scale-refresh-key (or STS_EMULATOR_SCALE_REFRESH_KEY)")
            }
            configuration.directory.scale = ScaleUsers(count: count, key: Array(key.utf8))
        }
        return configuration
    }
}
