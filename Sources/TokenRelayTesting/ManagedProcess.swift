import Foundation
import Synchronization

/// A child process started by a test (the built `token-relay` or `sts-emulator` binary, or a
/// system program such as pgbouncer), stopped with SIGTERM when the test is done. Its first JSON
/// line with `"event":"listening"` on standard output tells the port, unless the port was given;
/// standard error goes to `<name>-<id>.log` and standard output to `<name>-<id>.stdout.log` in
/// ``TestLogs/directory`` (scanned for secrets by `make test`).
public final class ManagedProcess: Sendable {
    public let port: Int
    public let logPath: String
    private let process: Mutex<Process?>

    public struct StartError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Starts `executable` and waits up to `timeout` seconds for it to report its port, on a
    /// thread of its own (``onOwnThread(_:)``): a relay's start-up (its migrations) takes seconds
    /// on a loaded machine, and a wait on one of the two task-pool threads stalls every other
    /// test's async work in the process meanwhile.
    ///
    /// At most as many start at once as the machine has cores (``StartSlots``): while each start
    /// held a pool thread, the pool's size bounded them; unbounded, dozens of suites started
    /// their relays and emulators together, and on a loaded machine some reported no port
    /// within the timeout.
    public static func start(executable: String, arguments: [String], environment: [String: String], timeout: Double = 20) async throws
        -> ManagedProcess
    {
        try await StartSlots.shared.run {
            try await onOwnThread {
                try ManagedProcess(executable: executable, arguments: arguments, environment: environment, knownPort: nil, timeout: timeout)
            }
        }
    }

    /// Starts a program that prints no `listening` line (e.g. pgbouncer) on a `port` it was told,
    /// and returns at once: the caller waits until it serves, in the program's own protocol.
    public convenience init(executable: String, arguments: [String], environment: [String: String], port: Int) throws {
        try self.init(executable: executable, arguments: arguments, environment: environment, knownPort: port, timeout: 0)
    }

    private init(executable: String, arguments: [String], environment: [String: String], knownPort: Int?, timeout: Double) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        let name = URL(fileURLWithPath: executable).lastPathComponent
        let stem = TestLogs.directory + "/tokenrelay-test-\(name)-\(UUID().uuidString.prefix(8))"
        logPath = stem + ".log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        _ = FileManager.default.createFile(atPath: stem + ".stdout.log", contents: nil)
        process.standardError = FileHandle(forWritingAtPath: logPath)
        if knownPort == nil { try process.runRetryingDescriptorRace() } else { try Self.runWithSignalsUnblocked(process) }

        let reader = output.fileHandleForReading
        let stdoutLog = FileHandle(forWritingAtPath: stem + ".stdout.log")
        let found = Mutex<Int?>(knownPort)
        let done = DispatchSemaphore(value: 0)
        // Reads stdout for the whole life of the child so it never blocks on a full pipe.
        Thread.detachNewThread {
            var buffer = Data()
            var signalled = knownPort != nil
            while true {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                stdoutLog?.write(chunk)
                guard !signalled else { continue }
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: 10) {
                    let line = buffer[buffer.startIndex..<newline]
                    buffer = Data(buffer[buffer.index(after: newline)...])
                    if let object = try? JSONSerialization.jsonObject(with: line) as? [String: Any], object["event"] as? String == "listening",
                        let port = object["port"] as? Int
                    {
                        found.withLock { $0 = port }
                        signalled = true
                        done.signal()
                    }
                }
            }
            if !signalled { done.signal() }
        }
        if knownPort == nil { _ = done.wait(timeout: .now() + timeout) }
        guard let port = found.withLock({ $0 }) else {
            process.terminate()
            let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            throw StartError(description: "\(name) did not report a port within \(timeout)s; log:\n\(log.suffix(2000))")
        }
        self.port = port
        self.process = Mutex(process)
    }

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Starts a system program with no signal blocked. A child inherits the signal mask of the
    /// thread that spawns it, and the test runner's threads block most signals: a program that
    /// handles SIGTERM with `sigaction` (pgbouncer) would never see it. The built executables
    /// wait for their signals with `sigwait` or dispatch sources, and keep the inherited mask.
    private static func runWithSignalsUnblocked(_ process: Process) throws {
        var none = sigset_t()
        var previous = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        try process.runRetryingDescriptorRace()
    }

    /// Sends SIGTERM and returns at once; a thread of its own waits for the exit and kills
    /// (SIGKILL) a child still running after `graceSeconds`, reporting it on standard error, so a
    /// shutdown bug cannot hang the suite. For a test's `defer`, which runs on a task-pool thread
    /// and cannot await: a blocking wait there (a relay's graceful shutdown) stalled other tests'
    /// async work. A test that needs the child gone first awaits ``stopAndWait(graceSeconds:)``.
    public func stop(graceSeconds: Double = 20) {
        guard let pid = signalTermination() else { return }
        let logPath = logPath
        Thread.detachNewThread { Self.reap(pid, graceSeconds: graceSeconds, logPath: logPath) }
    }

    /// Sends SIGTERM and returns once the child exited (killed after `graceSeconds`, as
    /// ``stop(graceSeconds:)`` does), waiting on a thread of its own. Tests of graceful shutdown
    /// assert the exit themselves (``waitForExit()``).
    public func stopAndWait(graceSeconds: Double = 20) async {
        guard let pid = signalTermination() else { return }
        let logPath = logPath
        await onOwnThread { Self.reap(pid, graceSeconds: graceSeconds, logPath: logPath) }
    }

    /// Takes the child out (later stops do nothing) and sends it SIGTERM; nil when it no longer runs.
    private func signalTermination() -> pid_t? {
        guard
            let process = self.process.withLock({ current -> Process? in
                defer { current = nil }
                return current
            })
        else { return nil }
        let pid = process.processIdentifier
        guard Self.runs(pid) else { return nil }
        kill(pid, SIGTERM)
        return pid
    }

    /// Waits for `pid` to exit after SIGTERM; kills it after `graceSeconds`. Blocks: call it on a
    /// thread of its own.
    private static func reap(_ pid: pid_t, graceSeconds: Double, logPath: String) {
        guard !exits(pid, within: graceSeconds) else { return }
        FileHandle.standardError.write(
            Data("ManagedProcess: pid \(pid) did not exit within \(graceSeconds) s of SIGTERM; killed (log: \(logPath))\n".utf8))
        kill(pid, SIGKILL)
        _ = exits(pid, within: 10)
    }

    /// Whether `pid` exits within `seconds` (polled every 20 ms with ``runs(_:)``).
    private static func exits(_ pid: pid_t, within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while runs(pid) {
            guard Date() < deadline else { return false }
            usleep(20_000)
        }
        return true
    }

    /// Whether `pid` is still this process's child and has not exited: `waitpid` with `WNOHANG`
    /// answers 0 only then. A child that exited is reaped here; one reaped elsewhere (Foundation's
    /// own monitor) answers `ECHILD`. Neither `Process.isRunning` nor `waitUntilExit` will do:
    /// Foundation sometimes reaps a child without noticing (`isRunning` stays true, and
    /// `waitUntilExit` blocks a thread of the two-thread cooperative pool forever), and a signal
    /// sent to the pid after that reaches whatever process the kernel gave that pid next. In CI,
    /// stop() waited out its 20 s on relays that had exited cleanly and then sent SIGKILL to the
    /// pid: another test's new relay died right after it started listening.
    private static func runs(_ pid: pid_t) -> Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == 0
    }

    /// Whether the child runs (false once it exited or was stopped).
    public var isRunning: Bool {
        process.withLock { $0?.isRunning ?? false }
    }

    /// Sends `signal` (e.g. `SIGHUP`) to the child while it runs.
    public func send(signal: Int32) {
        process.withLock { process in
            if let process, process.isRunning { kill(process.processIdentifier, signal) }
        }
    }

    /// Sends SIGTERM without waiting (graceful-shutdown tests); ``waitForExit()`` collects the status.
    public func terminate() {
        process.withLock { $0 }?.terminate()
    }

    /// Kills the child with SIGKILL (a crash: no handler runs, nothing is drained or released)
    /// and waits for it to be gone. Returns false when it was not running.
    @discardableResult
    public func killAbruptly() async -> Bool {
        guard let pid = process.withLock({ $0?.processIdentifier }), Self.runs(pid) else { return false }
        kill(pid, SIGKILL)
        _ = await onOwnThread { Self.exits(pid, within: 10) }
        return true
    }

    /// Waits for the child to exit, on a thread of its own, and returns its exit status (nil when
    /// already collected by ``stop()``).
    public func waitForExit() async -> Int32? {
        guard let process = process.withLock({ $0 }) else { return nil }
        return await onOwnThread {
            process.waitUntilExit()
            return process.terminationStatus
        }
    }

    /// The child's log so far (for assertions that nothing secret was written).
    public func log() -> String {
        (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
    }

    deinit { stop() }
}

/// Bounds how many child processes start at once in this test process (one per core), without
/// holding a thread while a start waits its turn.
actor StartSlots {
    static let shared = StartSlots(limit: max(2, ProcessInfo.processInfo.activeProcessorCount))

    private let limit: Int
    private var running = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(limit: Int) { self.limit = limit }

    /// Runs `body` once a slot is free; the slot is free again when it returns or throws.
    nonisolated func run<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        await acquire()
        do {
            let value = try await body()
            await release()
            return value
        } catch {
            await release()
            throw error
        }
    }

    private func acquire() async {
        guard running >= limit else {
            running += 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    /// Hands the slot to the next waiter, or frees it.
    private func release() {
        if waiting.isEmpty { running -= 1 } else { waiting.removeFirst().resume() }
    }
}

/// Where end-to-end tests write the logs of the processes they start, and the secrets they used
/// or saw (for `scripts/scan-test-logs`, which fails `make test` when a log holds one).
public enum TestLogs {
    /// `TOKENRELAY_TEST_LOG_DIR` (created when missing), else the temporary directory.
    public static var directory: String {
        guard let dir = ProcessInfo.processInfo.environment["TOKENRELAY_TEST_LOG_DIR"], !dir.isEmpty else {
            var temporary = NSTemporaryDirectory()
            while temporary.count > 1 && temporary.hasSuffix("/") { temporary.removeLast() }
            return temporary
        }
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// Whether secrets are recorded: only when `TOKENRELAY_TEST_LOG_DIR` is set (by `make test`,
    /// whose scan deletes them afterwards).
    public static var recordsSecrets: Bool {
        !(ProcessInfo.processInfo.environment["TOKENRELAY_TEST_LOG_DIR"] ?? "").isEmpty
    }

    /// Appends `secrets` to `<directory>/<file>.secrets`, one per line (never printed).
    public static func record(_ secrets: [String], in file: String) {
        guard recordsSecrets else { return }
        let path = directory + "/" + file + ".secrets"
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        guard let handle = FileHandle(forWritingAtPath: path) else { return }
        defer { try? handle.close() }
        _ = try? handle.seekToEnd()
        handle.write(Data(secrets.filter { !$0.isEmpty }.map { $0 + "\n" }.joined().utf8))
    }
}

/// Where the package's built executables are: `TOKENRELAY_BIN_DIR`, else beside the test bundle.
public enum BuiltProducts {
    public static func path(_ name: String, file: StaticString = #filePath) -> String {
        var candidates: [String] = []
        if let dir = ProcessInfo.processInfo.environment["TOKENRELAY_BIN_DIR"] { candidates.append(dir) }
        let bundle = URL(fileURLWithPath: CommandLine.arguments.first ?? "").deletingLastPathComponent()
        candidates.append(bundle.path)
        candidates.append(bundle.deletingLastPathComponent().path)
        candidates.append(packageRoot(file: file) + "/.build/debug")
        for dir in candidates where FileManager.default.isExecutableFile(atPath: dir + "/" + name) {
            return dir + "/" + name
        }
        return packageRoot(file: file) + "/.build/debug/" + name
    }

    /// The package root, found by walking up from this source file to `Package.swift`.
    public static func packageRoot(file: StaticString = #filePath) -> String {
        var url = URL(fileURLWithPath: "\(file)").deletingLastPathComponent()
        while url.path != "/" {
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url.path }
            url.deleteLastPathComponent()
        }
        return FileManager.default.currentDirectoryPath
    }
}
