import Foundation
import Testing
import TokenRelayBase

/// ``RelayClock``, the one reading of time, and ``TestClock``, the tests' (issue 27 item 6).
@Suite("Relay clock")
struct RelayClockTests {
    @Test("A manual clock stands still until moved; wall and monotonic readings move together")
    func manualClock() {
        let manual = TestClock(unixTime: 1_800_000_000.75)
        let clock = manual.clock
        #expect(clock.unixTime == 1_800_000_000.75)
        #expect(clock.seconds == 1_800_000_000)
        #expect(clock.date == Date(timeIntervalSince1970: 1_800_000_000.75))
        #expect(clock.monotonicSeconds == 0)
        #expect(clock.unixTime == 1_800_000_000.75, "a manual clock moved by itself")
        manual.advance(by: 0.25)
        #expect(clock.seconds == 1_800_000_001)
        #expect(clock.monotonicSeconds == 0.25)
        // Every RelayClock taken from it reads the same time.
        #expect(manual.clock.unixTime == clock.unixTime)
    }

    @Test("The system clock reads Date() for wall time and never goes back on its monotonic reading")
    func systemClock() {
        let before = Date().timeIntervalSince1970
        let wall = RelayClock.system.unixTime
        let after = Date().timeIntervalSince1970
        #expect(before <= wall && wall <= after)
        let first = RelayClock.system.monotonicSeconds
        let second = RelayClock.system.monotonicSeconds
        #expect(first >= 0 && second >= first)
    }

    @Test("The upstream retry loop reads the clock it is built on")
    func upstreamClock() {
        let manual = TestClock(unixTime: 1_000)
        let upstream = UpstreamClock(manual.clock)
        #expect(upstream.now() == Date(timeIntervalSince1970: 1_000))
        manual.advance(by: 10)
        #expect(upstream.now() == Date(timeIntervalSince1970: 1_010))
    }
}
