import Foundation
import Glibc
import Testing

@testable import HTTPServerBridge

@Suite("Request head deadlines")
struct RequestHeadDeadlineTests {
    @Test("Only a connection waiting for its head past the limit is shut down, once; a busy one is left alone")
    func lateHeadsOnly() throws {
        var pair: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[0]); close(pair[1]) }
        var busyPair: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &busyPair) == 0)
        defer { close(busyPair[0]); close(busyPair[1]) }

        let deadlines = RequestHeadDeadlines(seconds: 2)
        let waiting = deadlines.opened(socket: pair[0])
        let busy = deadlines.opened(socket: busyPair[0])
        busy.requestStarted()
        let opened = waiting.waitingSince.load(ordering: .relaxed)
        #expect(deadlines.shutDownLate(now: opened + 1999) == 0)
        #expect(deadlines.shutDownLate(now: opened + 2001) == 1)
        #expect(deadlines.shutDownLate(now: opened + 2002) == 0)
        var byte: UInt8 = 0
        #expect(recv(pair[1], &byte, 1, Int32(MSG_DONTWAIT)) == 0, "the peer sees the end of the stream")
        #expect(recv(busyPair[1], &byte, 1, Int32(MSG_DONTWAIT)) == -1, "the busy connection is untouched")
        // After its request completes, the busy connection's clock starts again.
        busy.requestCompleted()
        deadlines.closed(waiting)
        #expect(deadlines.shutDownLate(now: RequestHeadDeadlines.nowMillis() + 1000) == 0)
        #expect(deadlines.shutDownLate(now: RequestHeadDeadlines.nowMillis() + 2500) == 1)
    }
}
