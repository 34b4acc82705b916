import Foundation

/// SIGTERM/SIGINT handling for the executable: block both before any thread starts (threads
/// inherit the mask, so none dies of the default action), then wait for one with `sigwait`.
public enum TerminationSignals {
    private static func set() -> sigset_t {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGTERM)
        sigaddset(&signals, SIGINT)
        return signals
    }

    /// Blocks SIGTERM and SIGINT in the calling thread and every thread it starts later.
    public static func block() {
        var signals = set()
        pthread_sigmask(SIG_BLOCK, &signals, nil)
    }

    /// Waits until SIGTERM or SIGINT arrives (call `block()` first).
    /// - Returns: the signal number.
    @discardableResult
    public static func wait() -> Int32 {
        var signals = set()
        var received: Int32 = 0
        sigwait(&signals, &received)
        return received
    }
}
