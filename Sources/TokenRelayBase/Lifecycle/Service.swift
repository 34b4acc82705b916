/// A long-running part of the process that a ``ServiceGroup`` starts and stops, in the shape of
/// swift-service-lifecycle's `Service` (our own small code: no outside packages here).
///
/// - ``run()`` does the work until the service is done or its task is cancelled.
/// - Cancellation means stop: a service finishes what must not be lost (the HTTP server drains,
///   the issuance flusher writes its counts), releases what it holds, and returns. It should
///   return promptly; the group waits for it before stopping the next one.
public protocol Service: Sendable {
    /// Runs until cancelled (stop) or done.
    /// - Throws: a failure that stops the group; `CancellationError` counts as stopping.
    func run() async throws

    /// The name in `service.*` log lines. Default: the type's name.
    var name: String { get }
}

extension Service {
    public var name: String { String(describing: type(of: self)) }
}

/// A service that does nothing until it is stopped, then runs `action` once (writing what is
/// still in memory, closing a pool).
package struct OnStop: Service {
    package let name: String
    package let action: @Sendable () async -> Void

    package init(_ name: String, _ action: @escaping @Sendable () async -> Void) {
        self.name = name
        self.action = action
    }

    package func run() async {
        await Lifecycle.untilCancelled()
        await action()
    }
}

/// Helpers for services.
package enum Lifecycle {
    /// Suspends until the current task is cancelled; returns at once when it already is.
    package static func untilCancelled() async {
        await LifecycleEvent().signalled()
    }
}
