import Foundation
import STSEmulator

// sts-emulator: options in EmulatorConfiguration; prints one JSON "listening" line, then serves
// until SIGTERM or SIGINT.
TerminationSignals.block()
do {
    let configuration = try EmulatorConfiguration.parse(
        arguments: Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment)
    let server = try EmulatorServer(configuration: configuration)
    try server.start()
    FileHandle.standardOutput.write(Data((server.listeningLine + "\n").utf8))
    TerminationSignals.wait()
    server.stop()
    exit(0)
} catch {
    FileHandle.standardError.write(Data("sts-emulator: \(error)\n".utf8))
    exit(1)
}
