import Foundation
import TokenRelayBase

// The `token-relay` command: `serve` and the operators' commands (CommandLineTool).
package let status = await CommandLineTool.run(Array(CommandLine.arguments.dropFirst()))
exit(status)
