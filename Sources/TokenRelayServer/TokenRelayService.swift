import Foundation
import IdentityCore
import TokenRelayBase
import TokenRelayHTTP
import TokenRelayStore

/// The running service: ``AppDependencies`` built from the configuration, run as a
/// ``ServiceGroup`` that serves HTTP until SIGTERM (or SIGINT) and re-reads the key ring and the
/// client credential on SIGHUP.
public final class TokenRelayService: Sendable {
    public let configuration: Configuration
    package let dependencies: AppDependencies
    private let logger: Logger
    public var metrics: Metrics { dependencies.metrics }
    /// Every route served, as (method, OpenAPI path template): the OpenAPI parity test reads it.
    public var routeTable: [(method: String, path: String)] {
        dependencies.router.openAPIOperations + (dependencies.managementRouter?.openAPIOperations ?? [])
    }
    /// Every route with the access it declared (the permission-table test reads it).
    package var routeAccess: [(method: String, template: String, access: RouteAccess)] {
        dependencies.router.routes.map { ($0.method, $0.template, $0.access) }
    }
    /// API-key authentication; `authenticator.forget(keyId:)` drops a revoked key from this replica's memory.
    package var authenticator: APIKeyAuthenticator { dependencies.authenticator }
    /// Token answers per (key, account), flushed in batches (behaviour §12 Audit).
    package var issuance: IssuanceCounter { dependencies.issuance }

    /// - Throws: `ConfigurationError` when a setting cannot be used (authority, key ring, migrations).
    public init(configuration: Configuration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        dependencies = try .live(configuration: configuration, logger: logger)
    }

    /// Applies migrations when configured, then serves until SIGTERM or SIGINT, and stops
    /// gracefully: stops accepting connections, lets in-flight requests finish for up to
    /// `TOKENRELAY_SHUTDOWN_TIMEOUT_S`, writes the token issuance counts and key usage still in
    /// memory, stops the background jobs, then closes the pool (``AppDependencies/services(onListening:)``).
    /// - Parameter onListening: called with the bound port once the server accepts connections.
    /// - Returns: whether every request in flight at shutdown finished in time.
    /// - Throws: a migration or start-up failure (e.g. the port is taken), or the first failure
    ///   of a service, after the others have stopped.
    @discardableResult
    public func run(onListening: @escaping @Sendable (Int) -> Void = { _ in }) async throws -> Bool {
        if configuration.database.migrateOnStart, let migrator = dependencies.migrator {
            let applied = try await migrator.apply(on: dependencies.pool)
            logger.info("migrate.applied", ["migrations.count": String(applied.count)])
        }
        if let webhooks = dependencies.webhooks {
            // Before the first request: events of this run come after the point (issue 10 item 12).
            // A database down now is not fatal: the deliverer records the point when it is back.
            do { try await webhooks.beginDelivery() } catch {
                logger.warn("webhook.begin_failed", ["error": String(describing: type(of: error))])
            }
        }
        // Before the first request, so a suspended tenant is refused from the start; a database
        // down now is logged and the periodic reload fills the set (behaviour §12 Tenants).
        await dependencies.tenantReloader.reload()
        let services = dependencies.services(onListening: onListening)
        // The background tasks' grace starts with the shutdown, so the HTTP drain and theirs
        // share TOKENRELAY_SHUTDOWN_TIMEOUT_S.
        let backgroundTasks = dependencies.backgroundTasks
        let followers = dependencies.services.signIns.followers
        let traceExporter = dependencies.traceExporter
        let group = ServiceGroup(
            services: services, shutdownSignals: [SIGTERM, SIGINT], onHangup: reloadFromEnvironment,
            onStopping: {
                backgroundTasks.beginGrace()
                // The last spans are sent within the same TOKENRELAY_SHUTDOWN_TIMEOUT_S.
                traceExporter?.beginGrace()
                // A long poll of a sign-in answers its current status now rather than hold the drain.
                followers.stopWaiting()
            }, logger: logger)
        try await group.run()
        let drained = services.compactMap { ($0 as? HTTPServerService)?.drained }.allSatisfy { $0 }
        logger.info("service.stopped", ["drained": String(drained)])
        return drained
    }

    /// Runs one refresh-token keep-alive pass now (`token-relay keepalive --once`).
    /// - Returns: the pass summary as one JSON object (`ran`, `refreshed`, `failed`, `deferred`).
    /// - Throws: `RelayError` when the database fails.
    public func runKeepAlivePass() async throws -> String {
        try await runKeepAlivePass(progress: nil)
    }

    /// ``runKeepAlivePass()`` telling `progress` the events pruned, the accounts to refresh and each one done.
    package func runKeepAlivePass(progress: (any ProgressSink)?) async throws -> String {
        do { return try await dependencies.keepAlive.runPass(progress: progress).json } catch let error as RelayError {
            throw ServiceError(description: error.detail)
        } catch let error as StoreError {
            throw ServiceError(description: RelayError(error).detail)
        }
    }

    /// On SIGHUP: reads the configuration again and takes its key ring
    /// (`TOKENRELAY_ENCRYPTION_KEYS` or its `_FILE`) and client credential (behaviour §11). What does
    /// not parse is logged and the one in use kept.
    private func reloadFromEnvironment() {
        let configuration: Configuration
        do {
            configuration = try ConfigurationLoader().load(requireIdentity: false)
        } catch {
            logger.error("configuration.reload_failed", ["error": String(describing: error)])
            return
        }
        do {
            reloadKeyRing(try KeyRing(parsing: configuration.encryption.keys))
        } catch {
            // `KeyRing(parsing:)` throws only `KeyRingError`.
            logger.error("encryption.key_ring_reload_failed", ["setting": "TOKENRELAY_ENCRYPTION_KEYS", "error": error.description])
        }
        do {
            try reloadCredential(configuration)
        } catch let error as ConfigurationError {
            logger.error("credential.reload_failed", ["setting": error.setting, "error": error.description])
        } catch {
            logger.error("credential.reload_failed", ["error": String(describing: error)])
        }
    }

    /// Replaces the encryption key ring (SIGHUP, behaviour §11): new tokens are sealed under its first
    /// key; stored tokens open under any of its keys.
    public func reloadKeyRing(_ ring: KeyRing) {
        dependencies.cipher.reload(ring)
        logger.info("encryption.key_ring_reloaded", ["key_id": ring.primary.id, "keys.count": String(ring.keys.count)])
    }

    /// Takes the client credential the configuration names now (SIGHUP, behaviour §11: a rotated
    /// secret or certificate file is used without a restart).
    /// - Throws: `ConfigurationError` naming the setting that cannot be used; the credential in
    ///   use stays.
    public func reloadCredential(_ configuration: Configuration) throws {
        try dependencies.credential.reload(from: configuration)
        logger.info("credential.reloaded", [:])
    }

    /// Writes this process's encryption counts to the database (the service does it every
    /// `TOKENRELAY_ISSUANCE_FLUSH_INTERVAL_S` and at shutdown). Best effort.
    public func flushKeyUsage() async {
        _ = try? await dependencies.ciphertexts.flushUsage()
    }

    /// Closes what a service that was never run holds (`keepalive --once`, tests): the
    /// listener, the HTTP client and the pool. Idempotent.
    public func stop() {
        dependencies.close()
    }
}
