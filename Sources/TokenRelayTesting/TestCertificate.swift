import Foundation

/// A self-signed RSA certificate and its key, made with the `openssl` command line tool in a
/// temporary directory, for certificate-credential tests (never a real credential).
public struct TestCertificate: Sendable {
    /// The directory holding the files; removed by `remove()`.
    public let directory: String
    /// The unencrypted private key (PKCS#8 PEM).
    public let keyPath: String
    /// The certificate PEM alone (what the emulator registers).
    public let certificatePath: String
    /// Private key and certificate in one PEM file (what `TOKENRELAY_CLIENT_CERTIFICATE` names).
    public let combinedPath: String

    /// ``init(commonName:days:)`` on a thread of its own: the key generation takes up to a second
    /// on a loaded machine, a stall of one of the two task-pool threads every other test shares.
    public static func make(commonName: String = "tokenrelay-test", days: Int = 2) async throws -> TestCertificate {
        try await onOwnThread { try TestCertificate(commonName: commonName, days: days) }
    }

    /// Makes a fresh 2048-bit key and a certificate valid for `days`. Blocks while `openssl`
    /// runs: from async code use ``make(commonName:days:)``.
    /// - Throws: `TestFailure` when `openssl` fails.
    public init(commonName: String = "tokenrelay-test", days: Int = 2) throws {
        directory = NSTemporaryDirectory() + "tokenrelay-cert-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        keyPath = directory + "/key.pem"
        certificatePath = directory + "/cert.pem"
        combinedPath = directory + "/credential.pem"
        _ = try Self.openssl([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", keyPath, "-out", certificatePath, "-subj", "/CN=\(commonName)", "-days",
            String(days),
        ])
        let key = try String(contentsOfFile: keyPath, encoding: .utf8)
        let certificate = try String(contentsOfFile: certificatePath, encoding: .utf8)
        try (key + certificate).write(toFile: combinedPath, atomically: true, encoding: .utf8)
    }

    /// The certificate's `x5t#S256` thumbprint (base64url SHA-256 of its DER form).
    public func sha256Thumbprint() throws -> String {
        let der = try Self.openssl(["x509", "-in", certificatePath, "-outform", "DER"])
        let digest = try Self.openssl(["dgst", "-sha256", "-binary"], input: der)
        return Self.base64URL(digest)
    }

    /// A PS256 client assertion (RFC 7523 §2.2) signed with this certificate's key, as a
    /// federated-credential file would hold one.
    public func clientAssertion(clientId: String, audience: String, lifetimeSeconds: Int = 600) throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        let header: [String: Any] = ["alg": "PS256", "typ": "JWT", "x5t#S256": try sha256Thumbprint()]
        let claims: [String: Any] = [
            "aud": audience, "iss": clientId, "sub": clientId, "jti": UUID().uuidString, "nbf": now, "iat": now, "exp": now + lifetimeSeconds,
        ]
        let input =
            Self.base64URL(Array(try JSONSerialization.data(withJSONObject: header))) + "."
            + Self.base64URL(Array(try JSONSerialization.data(withJSONObject: claims)))
        let signature = try Self.openssl(
            ["dgst", "-sha256", "-sign", keyPath, "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:digest"], input: Array(input.utf8))
        return input + "." + Self.base64URL(signature)
    }

    public func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    @discardableResult
    static func openssl(_ arguments: [String], input: [UInt8] = []) throws -> [UInt8] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        try process.runRetryingDescriptorRace()
        stdin.fileHandleForWriting.write(Data(input))
        try stdin.fileHandleForWriting.close()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw TestFailure("openssl \(arguments.first ?? "") exited \(process.terminationStatus)") }
        return Array(output)
    }
}
