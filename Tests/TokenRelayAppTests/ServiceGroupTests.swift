import Foundation
import Synchronization
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayOperations
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

/// ``ServiceGroup``: order of shutdown, a failing service, cancellation; no sockets, no sleeps.
@Suite("Service group")
struct ServiceGroupTests {
    /// What the services did, in order, and a stream of the names of those that started.
    final class Journal: Sendable {
        private let entries = Mutex<[String]>([])
        let started: AsyncStream<String>
        private let startedContinuation: AsyncStream<String>.Continuation

        init() {
            (started, startedContinuation) = AsyncStream.makeStream()
        }

        func note(_ entry: String) { entries.withLock { $0.append(entry) } }
        func didStart(_ name: String) {
            note("start \(name)")
            startedContinuation.yield(name)
        }
        var all: [String] { entries.withLock { $0 } }

        /// Returns once `count` services have started.
        func waitForStarts(_ count: Int) async {
            var seen = 0
            for await _ in started {
                seen += 1
                if seen == count { return }
            }
        }
    }

    struct TestFailure: Error, Equatable {}

    /// Runs until stopped; notes when it starts, when it is told to stop and when it returns,
    /// yielding in between so that a group that did not wait would interleave the next stop.
    struct Recorded: Service {
        let name: String
        let journal: Journal
        var fails = false

        func run() async throws {
            journal.didStart(name)
            if fails { throw TestFailure() }
            await Lifecycle.untilCancelled()
            journal.note("stopping \(name)")
            for _ in 0..<20 { await Task.yield() }
            journal.note("stopped \(name)")
        }
    }

    @Test("A graceful shutdown stops the services one at a time, in the reverse of the order given")
    func shutdownOrder() async throws {
        let journal = Journal()
        let names = ["pool", "jobs", "flush", "http"]
        let group = ServiceGroup(services: names.map { Recorded(name: $0, journal: journal) }, logger: Self.logger)
        let running = Task { try await group.run() }
        await journal.waitForStarts(names.count)
        group.triggerGracefulShutdown()
        try await running.value
        let stops = journal.all.filter { !$0.hasPrefix("start ") }
        #expect(stops == names.reversed().flatMap { ["stopping \($0)", "stopped \($0)"] })
    }

    @Test("A failing service stops the others in order, and run() throws its error")
    func failingService() async throws {
        let journal = Journal()
        let group = ServiceGroup(
            services: [
                Recorded(name: "pool", journal: journal), Recorded(name: "jobs", journal: journal), Recorded(name: "http", journal: journal, fails: true),
            ],
            logger: Self.logger)
        await #expect(throws: TestFailure.self) { try await group.run() }
        #expect(journal.all.filter { !$0.hasPrefix("start ") } == ["stopping jobs", "stopped jobs", "stopping pool", "stopped pool"])
    }

    @Test("A service that returns before a shutdown stops the group too")
    func serviceReturns() async throws {
        let journal = Journal()
        struct Done: Service { func run() async {} }
        let group = ServiceGroup(services: [Recorded(name: "pool", journal: journal), Done()], logger: Self.logger)
        try await group.run()
        #expect(journal.all == ["start pool", "stopping pool", "stopped pool"])
    }

    @Test("Cancelling the task that runs the group cancels every service; run() returns once they have")
    func cancellation() async throws {
        let journal = Journal()
        let group = ServiceGroup(services: ["a", "b", "c"].map { Recorded(name: $0, journal: journal) }, logger: Self.logger)
        let running = Task { try await group.run() }
        await journal.waitForStarts(3)
        running.cancel()
        try await running.value
        let entries = journal.all
        for name in ["a", "b", "c"] { #expect(entries.contains("stopped \(name)")) }
    }

    @Test("A shutdown asked for before the services start still stops each once; OnStop runs its action at the stop")
    func earlyShutdownAndOnStop() async throws {
        let journal = Journal()
        let group = ServiceGroup(
            services: [OnStop("close") { journal.note("closed") }, Recorded(name: "http", journal: journal)], logger: Self.logger)
        group.triggerGracefulShutdown()
        try await group.run()
        #expect(journal.all.last == "closed")
        #expect(journal.all.filter { $0 == "closed" }.count == 1)
    }

    @Test("A lifecycle event wakes waiters that came before and after it, and a cancelled waiter")
    func lifecycleEvent() async {
        let event = LifecycleEvent()
        let early = Task { await event.signalled() }
        event.signal()
        await early.value
        await event.signalled()
        #expect(event.isSignalled)
        let other = LifecycleEvent()
        let cancelled = Task { await other.signalled() }
        cancelled.cancel()
        await cancelled.value
        #expect(!other.isSignalled)
    }

    @Test(
        "Dependencies list their services in start order: the pool closes last, held refresh leases are released after the background drain, the HTTP server stops first, the management listener after it"
    )
    func dependencyOrder() throws {
        var configuration = Configuration.offline()
        let live = try AppDependencies.live(configuration: configuration, logger: Self.logger)
        defer { live.close() }
        #expect(
            live.services().map(\.name) == [
                "Resources", "RefreshLeases", "BackgroundTasks", "InvalidationListener", "TenantSuspensionReloader", "KeepAliveJob", "KeyUsageFlusher",
                "IssuanceFlusher", "ReadinessSelfCheck", "AccountHealthGauge", "HTTPServer",
            ])
        // With TOKENRELAY_MANAGEMENT_LISTEN: probes and scrapes are answered until the API has drained.
        (configuration.http.managementHost, configuration.http.managementPort) = ("127.0.0.1", 0)
        let managed = try AppDependencies.live(configuration: configuration, logger: Self.logger)
        defer { managed.close() }
        #expect(managed.services().map(\.name).suffix(2) == ["ManagementHTTPServer", "HTTPServer"])
        #expect(managed.router.routes.allSatisfy { !["/healthz", "/readyz", "/metrics"].contains($0.template) })
        #expect(managed.managementRouter?.routes.map(\.template).sorted() == ["/healthz", "/metrics", "/readyz"])
        let test = try AppDependencies.test(
            databaseURL: "postgresql://nobody@127.0.0.1:1/none", authority: "http://127.0.0.1:9/tenant",
            configure: {
                $0.keepAlive.afterDays = 0
                $0.webhooks.url = "http://127.0.0.1:9/hook"
            })
        defer { test.close() }
        #expect(test.server == nil)
        #expect(test.configuration.identity.knownAuthorities == ["http://127.0.0.1:9"])
        #expect(
            test.services().map(\.name) == [
                "Resources", "RefreshLeases", "BackgroundTasks", "InvalidationListener", "TenantSuspensionReloader", "KeepAliveJob", "WebhookDeliverer",
                "KeyUsageFlusher", "IssuanceFlusher", "ReadinessSelfCheck", "AccountHealthGauge",
            ])
    }

    static let logger = Logger(level: .error, logPII: false, sink: .memory())
}
