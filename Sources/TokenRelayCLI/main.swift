import Foundation
import TokenRelayApp

// Thin entry point: everything lives in TokenRelayApp so tests can reach it.
let status = await CommandLineTool.run(Array(CommandLine.arguments.dropFirst()))
exit(status)
