import Foundation

/// SoftHSM2 (Debian's `softhsm2`) as the HSM of tests: a token directory and configuration of
/// this test process's own, tokens initialised in it with `softhsm2-util`.
///
/// SoftHSM reads `SOFTHSM2_CONF` and finds its tokens when the module is initialised, once per
/// process: ``shared`` sets it and initialises ``processToken`` before any test loads the
/// module, and tests in this process use that token with key labels of their own. A token
/// made later with ``initToken(label:pin:)`` is for processes a test starts afterwards
/// (`token-relay`), which get the configuration through ``environment``: a directory and
/// configuration apart from the process's own. In one directory, the process's module scanned
/// the token directory (every `C_GetSlotList`) while `softhsm2-util` made or deleted another
/// test's token in it, and a PKCS#11 test failed with CKR_GENERAL_ERROR in a full run.
public final class SoftHSM: @unchecked Sendable {  // immutable after init
    /// Debian's module path.
    public static let modulePath = "/usr/lib/softhsm/libsofthsm2.so"

    /// The process's SoftHSM directory and configuration, made on first use.
    public static let shared = SoftHSM()

    /// The directory holding `softhsm2.conf` and the tokens of this process's module.
    public let directory: String
    public let configurationPath: String
    /// The configuration of the tokens for other processes (``initToken(label:pin:)``), in a
    /// directory of its own beside ``directory``.
    public let childConfigurationPath: String
    /// The token this test process's own module sees: label and user PIN. Nil when SoftHSM2 is
    /// not installed or `softhsm2-util` failed (``processTokenError`` says why).
    public let processToken: (label: String, pin: String)?
    public let processTokenError: String?
    /// A second token no test logs in to: PKCS#11 login state is per token and application, so
    /// a wrong PIN is refused (`CKR_PIN_INCORRECT`) only on a token no session of the process is
    /// logged in to. Same PIN as ``processToken``.
    public let neverLoggedInLabel = "tokenrelay-pin-tests"

    private init() {
        directory = NSTemporaryDirectory() + "tokenrelay-softhsm-" + UUID().uuidString.prefix(8).lowercased()
        configurationPath = Self.writeConfiguration(tokens: directory + "/tokens", at: directory + "/softhsm2.conf")
        childConfigurationPath = Self.writeConfiguration(tokens: directory + "/child-tokens", at: directory + "/softhsm2-child.conf")
        setenv("SOFTHSM2_CONF", configurationPath, 1)
        let token = (label: "tokenrelay-tests", pin: "pin-" + UUID().uuidString.prefix(8))
        do {
            try Self.initToken(label: token.label, pin: token.pin, configurationPath: configurationPath)
            try Self.initToken(label: neverLoggedInLabel, pin: token.pin, configurationPath: configurationPath)
            processToken = token
            processTokenError = nil
        } catch {
            processToken = nil
            processTokenError = "\(error)"
        }
    }

    /// Writes a configuration whose tokens are in `tokens` (created) and returns its path.
    private static func writeConfiguration(tokens: String, at path: String) -> String {
        try? FileManager.default.createDirectory(atPath: tokens, withIntermediateDirectories: true)
        let configuration = "directories.tokendir = \(tokens)\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n"
        _ = FileManager.default.createFile(atPath: path, contents: Data(configuration.utf8))
        return path
    }

    /// Environment for a process that loads the module and uses the tokens ``initToken(label:pin:)``
    /// made (`SOFTHSM2_CONF`).
    public var environment: [String: String] { ["SOFTHSM2_CONF": childConfigurationPath] }

    /// Whether Debian's SoftHSM2 is installed (`scripts/install-deps` installs it).
    public static var isInstalled: Bool { FileManager.default.fileExists(atPath: modulePath) }

    /// Initialises a new token in the first free slot of the tokens for other processes
    /// (``environment``), running `softhsm2-util` on a thread of its own.
    /// - Parameters:
    ///   - label: the token label (at most 32 bytes).
    ///   - pin: the user PIN; the security officer PIN is made up and not kept.
    /// - Throws: when `softhsm2-util` fails (its standard error is in the message).
    public func initToken(label: String, pin: String) async throws {
        let path = childConfigurationPath
        try await onOwnThread { try Self.initToken(label: label, pin: pin, configurationPath: path) }
    }

    private static func initToken(label: String, pin: String, configurationPath: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/softhsm2-util")
        process.arguments = ["--init-token", "--free", "--label", label, "--pin", pin, "--so-pin", "so-" + UUID().uuidString.prefix(12)]
        process.environment = ProcessInfo.processInfo.environment.merging(["SOFTHSM2_CONF": configurationPath]) { $1 }
        let errors = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.runRetryingDescriptorRace()
        let message = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw SoftHSMError(message: "softhsm2-util --init-token failed (\(process.terminationStatus)): " + String(decoding: message, as: UTF8.self))
        }
    }

    /// Removes the directory (tokens included). Best effort; for a test process's end.
    public func destroy() {
        try? FileManager.default.removeItem(atPath: directory)
    }
}

public struct SoftHSMError: Error, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
