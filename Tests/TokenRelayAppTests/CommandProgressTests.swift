import Foundation
import IdentityCore
import Synchronization
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

/// The progress of long commands (issue 28 part 3): JSON lines when standard error is not a
/// terminal, a bar redrawn in place when it is, with counts and the time left.
@Suite("Command progress: JSON lines, the bar, the estimate")
struct CommandProgressTests {
    /// A progress whose clock the test moves, and what it wrote.
    final class Harness: Sendable {
        let now = Mutex(100.0)
        let written = Mutex<[String]>([])

        func progress(_ style: CommandProgress.Style) -> CommandProgress {
            CommandProgress(
                command: "encryption rotate", style: style, write: { text in self.written.withLock { $0.append(text) } },
                clock: { self.now.withLock { $0 } })
        }

        func advanceClock(_ seconds: Double) { now.withLock { $0 += seconds } }

        var lines: [[String: Any]] {
            written.withLock { $0 }.joined().split(separator: "\n").map { try! JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any] }
        }
    }

    @Test("JSON lines: one at the start, at most one a second, one when all are done and one at the end; counts, percent, time left")
    func jsonLines() {
        let harness = Harness()
        let progress = harness.progress(.jsonLines)
        progress.begin("refresh_tokens", total: 40)
        for _ in 0..<10 {
            harness.advanceClock(0.5)
            progress.advance(by: 1)
        }
        // 10 of 40 in 5 s: 30 more at the same pace take 15 s.
        let lines = harness.lines
        #expect(lines.first?["phase"] as? String == "refresh_tokens" && lines.first?["done"] as? Int == 0 && lines.first?["total"] as? Int == 40)
        #expect(lines.first?["event"] as? String == "progress" && lines.first?["command"] as? String == "encryption rotate")
        #expect(lines.count == 6, "one a second over 5 s, and the first: \(lines)")
        #expect(lines.last?["done"] as? Int == 10 && lines.last?["percent"] as? Double == 25 && lines.last?["eta_s"] as? Int == 15, "\(lines.last!)")
        #expect(lines.last?["elapsed_s"] as? Double == 5)
        harness.advanceClock(0.1)
        progress.advance(by: 30)
        #expect(harness.lines.last?["done"] as? Int == 40 && harness.lines.last?["percent"] as? Int == 100, "all done is always told")
        progress.end()
        let end = harness.lines.last!
        #expect(end["finished"] as? Bool == true && end["eta_s"] as? Int == 0 && end["done"] as? Int == 40)
    }

    @Test("A phase without a total tells the count alone; a new phase ends the open one; nothing after the end")
    func phases() {
        let harness = Harness()
        let progress = harness.progress(.jsonLines)
        progress.begin("events", total: nil)
        harness.advanceClock(2)
        progress.advance(by: 1000)
        #expect(harness.lines.last?["done"] as? Int == 1000 && harness.lines.last?["total"] == nil && harness.lines.last?["eta_s"] == nil)
        progress.begin("accounts", total: 3)
        let lines = harness.lines
        #expect(lines[lines.count - 2]["phase"] as? String == "events" && lines[lines.count - 2]["finished"] as? Bool == true)
        #expect(lines.last?["phase"] as? String == "accounts" && lines.last?["done"] as? Int == 0)
        progress.end()
        let count = harness.lines.count
        progress.advance(by: 1)
        progress.end()
        #expect(harness.lines.count == count)
        // An empty phase is complete at once.
        progress.begin("data_keys", total: 0)
        #expect(harness.lines.last?["percent"] as? Int == 100)
    }

    @Test("On a terminal: one bar redrawn in place (carriage return), a newline when the phase ends")
    func bar() {
        #expect(
            CommandProgress.bar(command: "tenants forget", phase: "accounts", done: 120, total: 300, eta: 4, width: 20)
                == "tenants forget · accounts [########------------]  120/300  40%  0:04 left")
        #expect(
            CommandProgress.bar(command: "keepalive", phase: "accounts", done: 3, total: 1000, eta: 3725)
                .hasSuffix("3/1000  0%  1:02:05 left"))
        #expect(CommandProgress.bar(command: "keepalive", phase: "events", done: 7, total: nil, eta: nil) == "keepalive · events 7 done")
        let harness = Harness()
        let progress = harness.progress(.bar)
        progress.begin("access_tokens", total: 4)
        harness.advanceClock(1)
        progress.advance(by: 2)
        progress.end()
        let written = harness.written.withLock { $0 }
        #expect(written.count == 3)
        #expect(written.allSatisfy { $0.hasPrefix("\r\u{1B}[2K") })
        #expect(written[1].contains("[############------------]  2/4  50%  0:01 left") && !written[1].hasSuffix("\n"), "\(written[1])")
        #expect(written[2].hasSuffix("\n") && written[2].contains("2/4"))
    }

    @Test("The estimate is the time left at the pace so far; none before the first item or without a total")
    func estimate() {
        #expect(CommandProgress.estimate(done: 25, total: 100, elapsed: 10) == 30)
        #expect(CommandProgress.estimate(done: 0, total: 100, elapsed: 10) == nil)
        #expect(CommandProgress.estimate(done: 5, total: nil, elapsed: 10) == nil)
        #expect(CommandProgress.estimate(done: 120, total: 100, elapsed: 10) == 0)
    }
}
