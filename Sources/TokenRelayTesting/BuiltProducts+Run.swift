import Foundation

extension BuiltProducts {
    /// What a finished run of a built executable printed.
    public struct Run: Sendable {
        /// The exit status.
        public let status: Int32
        /// Standard output.
        public let output: String
        /// Standard error.
        public let error: String
    }

    /// Runs the built executable `name` (e.g. `token-relay`) to its end, waiting on a thread of its
    /// own (``onOwnThread(_:)``), never on one of the task pool's.
    ///
    /// Standard error goes to a temporary file rather than a second pipe, so a child that writes
    /// much to it never blocks on a full pipe while standard output is read.
    /// - Parameters:
    ///   - arguments: its arguments.
    ///   - environment: its whole environment.
    /// - Returns: the exit status, standard output and standard error.
    /// - Throws: when the executable cannot be started.
    public static func run(_ name: String, _ arguments: [String], environment: [String: String]) async throws -> Run {
        try await run(executableAt: path(name), arguments, environment: environment)
    }

    /// Runs the executable at `executablePath` (any program: `pg_dump`, `git`, a script) to its
    /// end, as `run(_:_:environment:)` does.
    /// - Parameter environment: its whole environment; nil inherits this process's.
    public static func run(executableAt executablePath: String, _ arguments: [String], environment: [String: String]?) async throws -> Run {
        try await onOwnThread { try runBlocking(executableAt: executablePath, arguments, environment: environment) }
    }

    private static func runBlocking(executableAt executablePath: String, _ arguments: [String], environment: [String: String]?) throws -> Run {
        let errorPath = NSTemporaryDirectory() + "/tokenrelay-run-\(UUID().uuidString.prefix(8)).err"
        guard FileManager.default.createFile(atPath: errorPath, contents: nil), let errorFile = FileHandle(forWritingAtPath: errorPath) else {
            throw TestFailure("cannot create \(errorPath)")
        }
        defer { try? FileManager.default.removeItem(atPath: errorPath) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executablePath)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = errorFile
        do {
            try process.runRetryingDescriptorRace()
        } catch {
            try? errorFile.close()
            throw error
        }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try? errorFile.close()
        let errors = FileManager.default.contents(atPath: errorPath) ?? Data()
        return Run(status: process.terminationStatus, output: String(decoding: data, as: UTF8.self), error: String(decoding: errors, as: UTF8.self))
    }
}
