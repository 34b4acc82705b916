import Foundation

/// Polls `condition` every 50 ms until it holds or `seconds` pass, for tests that wait on
/// another process's step rather than sleep a fixed time (a fixed sleep depends on the
/// machine's load).
/// - Returns: whether it held, asked once more at the deadline.
public func eventually(within seconds: Double, _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(50))
    }
    return try await condition()
}
