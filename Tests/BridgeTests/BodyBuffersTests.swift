import HTTPCommon
import Testing

@Suite("Response body buffers used again")
struct BodyBuffersTests {
    @Test("a buffer given back is taken again empty with its storage; none are held before")
    func givenBackIsTakenAgain() {
        let buffers = BodyBuffers()
        #expect(buffers.take().capacity == 0)
        var answer = buffers.take()
        answer.append(contentsOf: [UInt8](repeating: 7, count: 2_500))
        let capacity = answer.capacity
        buffers.giveBack(answer)
        #expect(buffers.count == 1)
        let again = buffers.take()
        #expect(again.isEmpty)
        #expect(again.capacity == capacity)
        #expect(buffers.count == 0)
    }

    @Test("a buffer given back keeps its storage: the next take has it, not a copy")
    func storageKept() {
        let buffers = BodyBuffers()
        let sent = [UInt8](repeating: 7, count: 2_500)
        let sentStorage = Self.storage(sent)
        // As the server gives back a sent body: moved, the last reference to its storage.
        buffers.giveBack(consume sent)
        #expect(Self.storage(buffers.take()) == sentStorage, "the buffer given back was copied into new storage")
    }

    static func storage(_ bytes: [UInt8]) -> UInt? {
        bytes.withUnsafeBytes { $0.baseAddress.map { UInt(bitPattern: $0) } }
    }

    @Test("buffers under 1 KiB or over 16 KiB are freed, not kept; at most 64 are held")
    func bounded() {
        let buffers = BodyBuffers()
        buffers.giveBack([UInt8](repeating: 1, count: 100))
        buffers.giveBack([UInt8](repeating: 1, count: 100_000))
        #expect(buffers.count == 0)
        for _ in 0..<(BodyBuffers.keptCount + 10) { buffers.giveBack([UInt8](repeating: 1, count: 2_000)) }
        #expect(buffers.count == BodyBuffers.keptCount)
    }
}
