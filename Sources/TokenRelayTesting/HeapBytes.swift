internal import CHeapStatistics

/// What the process's heap holds, for tests that check memory accounting against real
/// allocations rather than against the estimate under test.
public enum HeapBytes {
    /// Bytes malloc has handed out and not had back, over all arenas and mmapped chunks (glibc `mallinfo2()`):
    /// process-wide, so a test measuring with it runs in a process of its own (tests running
    /// beside it in one `swift test` process moved a 90 MB fill's count by -20 % to +30 %).
    public static var inUse: Int { Int(tokenrelay_heap_bytes_in_use()) }
}
