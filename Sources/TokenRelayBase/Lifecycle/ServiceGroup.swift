import Foundation

/// Runs services side by side in one task group and stops them one at a time, in the reverse of
/// the order given, so what starts first stops last (swift-service-lifecycle's `ServiceGroup`,
/// in small).
///
/// The group stops when a graceful shutdown is asked for (``triggerGracefulShutdown()``, or one
/// of the shutdown signals), or when any service returns or throws before that. Stopping a
/// service cancels its task and waits for its `run()` to return before the next one is
/// cancelled. Cancelling the task that runs ``run()`` cancels every service at once.
///
/// Signals are handled here and nowhere else: each shutdown signal and SIGHUP gets a
/// `DispatchSource` (the default action ignored while the group runs); a SIGHUP runs
/// `onHangup` on the signal queue, which must not block for long.
public final class ServiceGroup: Sendable {
    private let services: [any Service]
    private let shutdownSignals: [Int32]
    private let onHangup: (@Sendable () -> Void)?
    private let onStopping: (@Sendable () -> Void)?
    private let logger: Logger
    private let shutdownRequested = LifecycleEvent()

    /// - Parameters:
    ///   - services: in start order; they stop in the reverse order.
    ///   - shutdownSignals: signals that start a graceful shutdown, e.g. `[SIGTERM, SIGINT]`.
    ///     Default none (tests).
    ///   - onHangup: run on every SIGHUP (re-read what may be re-read). Default: SIGHUP untouched.
    ///   - onStopping: run once when the group starts stopping, before the first service is
    ///     stopped (a shutdown deadline shared by every service starts here). Default none.
    ///   - logger: `service.failed` lines.
    public init(
        services: [any Service], shutdownSignals: [Int32] = [], onHangup: (@Sendable () -> Void)? = nil, onStopping: (@Sendable () -> Void)? = nil,
        logger: Logger
    ) {
        self.services = services
        self.shutdownSignals = shutdownSignals
        self.onHangup = onHangup
        self.onStopping = onStopping
        self.logger = logger
    }

    /// Starts a graceful shutdown (as a shutdown signal does); a no-op after the first.
    public func triggerGracefulShutdown() {
        shutdownRequested.signal()
    }

    private enum Event: Sendable {
        case shutdownRequested
        case ended(index: Int, error: (any Error)?)
    }

    /// Runs every service until the group stops, then stops the rest in order.
    /// - Throws: the first error a service threw (other than `CancellationError`), after every
    ///   service has stopped.
    public func run() async throws {
        let sources = installSignalHandlers()
        defer { for source in sources { source.cancel() } }
        let stops = services.map { _ in LifecycleEvent() }
        let firstError: (any Error)? = await withTaskGroup(of: Event.self) { group in
            for (index, service) in services.enumerated() {
                let stop = stops[index]
                group.addTask {
                    do {
                        try await Self.run(service, until: stop)
                        return .ended(index: index, error: nil)
                    } catch {
                        return .ended(index: index, error: error)
                    }
                }
            }
            let shutdownRequested = self.shutdownRequested
            group.addTask {
                await shutdownRequested.signalled()
                return .shutdownRequested
            }
            var running = Set(services.indices)
            var firstError: (any Error)?
            func note(_ event: Event?) {
                guard case .ended(let index, let error) = event else { return }
                running.remove(index)
                guard let error, !(error is CancellationError) else { return }
                logger.error("service.failed", ["service.name": services[index].name, "error": String(describing: error)])
                if firstError == nil { firstError = error }
            }
            note(await group.next())
            onStopping?()
            for index in services.indices.reversed() where running.contains(index) {
                stops[index].signal()
                while running.contains(index), let event = await group.next() { note(event) }
            }
            group.cancelAll()
            return firstError
        }
        if let firstError { throw firstError }
    }

    /// Runs `service` until it returns, or until `stop` is signalled, when its task is cancelled
    /// and waited for.
    private static func run(_ service: any Service, until stop: LifecycleEvent) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await service.run() }
            group.addTask { await stop.signalled() }
            // Whichever ends first, the other is cancelled; the group waits for both.
            try await group.next()
            group.cancelAll()
            while try await group.next() != nil {}
        }
    }

    private func installSignalHandlers() -> [any DispatchSourceSignal] {
        let queue = DispatchQueue(label: "token-relay.signals")
        var sources: [any DispatchSourceSignal] = []
        let shutdownRequested = self.shutdownRequested
        for number in shutdownSignals {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { shutdownRequested.signal() }
            sources.append(source)
        }
        if let onHangup {
            signal(SIGHUP, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: queue)
            source.setEventHandler(handler: onHangup)
            sources.append(source)
        }
        for source in sources { source.resume() }
        return sources
    }
}
