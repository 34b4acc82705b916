import Foundation

// The `token-relay` command: `serve` and the operators' commands (CommandLineTool).
let status = await CommandLineTool.run(Array(CommandLine.arguments.dropFirst()))
exit(status)
