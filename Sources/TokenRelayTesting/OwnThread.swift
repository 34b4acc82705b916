import Foundation

/// Runs blocking work (a socket read, a child's exit, a server's drain) on a thread of its own
/// and awaits its result.
///
/// Swift's cooperative pool has one thread per core: two on CI. A test that blocks one of them
/// while it waits for something that itself needs the pool (an in-process server's async handler)
/// can wait out its whole timeout; stop 23's CI failed that way, a drain polling on one pool
/// thread while a child process was awaited on the other.
/// - Throws: what `body` throws.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread {
            continuation.resume(with: Result { try body() })
        }
    }
}

/// ``onOwnThread(_:)`` for work that cannot throw.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread {
            continuation.resume(returning: body())
        }
    }
}
