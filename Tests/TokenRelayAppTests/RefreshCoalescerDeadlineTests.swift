import Foundation
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

/// A caller's deadline bounds its wait for a coalesced refresh, never the refresh itself (behaviour §5
/// deadlines): the caller gets 504 at its deadline while the work runs on and its result still
/// reaches later callers. (A task group racing the work against a timer waited for the work.)
@Suite("Refresh coalescer deadlines")
struct RefreshCoalescerDeadlineTests {
    @Test("A caller whose deadline passes first gets 504 at the deadline, not when the work ends; the work runs on")
    func deadlineBeforeWork() async throws {
        let coalescer = RefreshCoalescer<Int>(tasks: BackgroundTasks())
        let finished = Mutex(false)
        let release = Mutex(false)
        let started = Date()
        await #expect {
            _ = try await coalescer.run(key: "k", until: Date().addingTimeInterval(0.2)) {
                // The work ends only when the test lets it: the caller cannot have waited for it.
                while !release.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(20)) }
                finished.withLock { $0 = true }
                return 42
            }
        } throws: { error in
            (error as? RelayError)?.status == 504 && (error as? RelayError)?.code == .upstreamUnavailable
        }
        // Returned while the work still ran (before the fix the caller waited for the work, and
        // here the work never ends on its own).
        let waited = Date().timeIntervalSince(started)
        #expect(finished.withLock { $0 } == false, "the caller waited \(waited) s, until the work ended, for a 0.2 s deadline")
        #expect(waited >= 0.19, "the caller gave up after \(waited) s, before its 0.2 s deadline")
        // The work ran on: a caller without a deadline joins it and gets its value.
        release.withLock { $0 = true }
        let (value, joined) = try await coalescer.run(key: "k") { 0 }
        #expect(value == 42)
        #expect(joined)
        #expect(finished.withLock { $0 })
    }

    @Test("Work that ends before the deadline gives its value, and a failure is the caller's")
    func workBeforeDeadline() async throws {
        let coalescer = RefreshCoalescer<Int>(tasks: BackgroundTasks())
        let (value, joined) = try await coalescer.run(key: "k", until: Date().addingTimeInterval(30)) { 7 }
        #expect(value == 7)
        #expect(!joined)
        await #expect(throws: RelayError.self) {
            _ = try await coalescer.run(key: "other", until: Date().addingTimeInterval(30)) { throw RelayError(.internal, "boom") }
        }
    }
}
