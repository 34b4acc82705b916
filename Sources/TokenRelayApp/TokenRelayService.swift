import Foundation
import HTTPClientBridge
import HTTPServerBridge
import IdentityCore
import PostgresBridge
import Synchronization

/// The running service: builds every component from the configuration and serves HTTP.
public final class TokenRelayService: Sendable {
    public let configuration: Configuration
    private let server: HTTPServer
    private let pool: PostgresPool
    private let http: HTTPClient
    private let logger: Logger
    private let migrator: Migrator?
    private let invalidation: ReplicaInvalidation
    public let metrics: Metrics
    private let urls: PublicURLs
    private let cipher: TokenCipher
    private let ciphertexts: CiphertextStore
    private let credential: ClientCredential
    private let credentialHealth: CredentialHealth
    /// Every route served, as (method, OpenAPI path template): the OpenAPI parity test reads it.
    public let routeTable: [(method: String, path: String)]
    /// API-key authentication; `authenticator.forget(keyId:)` drops a revoked key from this replica's memory.
    let authenticator: APIKeyAuthenticator
    /// Every route with the access it declared (the permission-table test reads it).
    let routeAccess: [(method: String, template: String, access: RouteAccess)]
    private let keepAlive: KeepAliveJob
    private let webhooks: WebhookDeliverer?
    /// The keep-alive and webhook loops started by `start()`, cancelled by `stop()`.
    private let backgroundJobs = Mutex<[Task<Void, Never>]>([])
    /// The webhook loop (also in `backgroundJobs`), which `shutdown()` waits for.
    private let webhookJob = Mutex<Task<Void, Never>?>(nil)
    /// Token answers per (key, account), flushed in batches (SPEC §12 Audit).
    let issuance: IssuanceCounter
    private let issuanceStore: IssuanceStore

    /// - Throws: `ConfigurationError` when a setting cannot be used (authority, key ring, migrations).
    public init(configuration: Configuration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        let metrics = Metrics()
        metrics.describeOperations()
        self.metrics = metrics
        let pool = PostgresPool(url: configuration.databaseURL, size: configuration.databasePoolSize)
        self.pool = pool
        let http = HTTPClient()
        self.http = http
        let database = Database(pool: pool)
        let ring: KeyRing
        do { ring = try KeyRing(parsing: configuration.encryptionKeys) } catch {
            throw ConfigurationError(setting: "TOKENRELAY_ENCRYPTION_KEYS", reason: String(describing: error))
        }
        let authorities: AuthorityValidator
        let defaultAuthority: Authority
        do {
            authorities = try AuthorityValidator(
                knownAuthorities: configuration.knownAuthorities, allowHTTPLoopback: configuration.allowHTTPLoopback,
                defaultAuthority: configuration.authority)
            defaultAuthority = try authorities.validate(configuration.authority)
        } catch {
            throw ConfigurationError(setting: "TOKENRELAY_AUTHORITY", reason: error.detail)
        }
        let migrator = try Migrator.locateDirectory(configured: configuration.migrationsDirectory).map { try Migrator(directory: $0) }
        self.migrator = migrator

        let urls = PublicURLs(configuration: configuration)
        self.urls = urls
        let now: @Sendable () -> Int = { Int(Date().timeIntervalSince1970) }
        let cipher = TokenCipher(ring: ring)
        self.cipher = cipher
        let store = TokenStore(database: database, clientId: configuration.clientId, cipher: cipher)
        let ciphertexts = CiphertextStore(database: database, clientId: configuration.clientId, cipher: cipher)
        self.ciphertexts = ciphertexts
        let upstream = RetryingHTTPClient(http: http, metrics: metrics, logger: logger)
        let credential = try ClientCredential(configuration: configuration)
        self.credential = credential
        // Per replica: each replica learns from its own token-endpoint answers (SPEC §12 Health).
        let credentialHealth = CredentialHealth(metrics: metrics)
        self.credentialHealth = credentialHealth
        Self.noteExpiry(of: credential, secretExpiresAt: configuration.clientSecretExpiresAt, in: credentialHealth)
        let sts = STSClient(
            http: upstream, clientId: configuration.clientId, credential: credential,
            maxAttempts: configuration.maxAttempts,
            maxRetryAfterSeconds: configuration.maxRetryAfterSeconds, metrics: metrics, credentialHealth: credentialHealth)
        let memory = MemoryTokenCache()
        let accounts = AccountCache(ttl: TimeInterval(configuration.cacheTTLSeconds))
        let uiRequired = UIRequiredMemory(ttlSeconds: configuration.uiRequiredTTLSeconds)
        let declinedScopes = DeclinedScopesMemory()
        let downstreamThrottle = ThrottleMemory()
        let throttles = [sts.throttle, downstreamThrottle]
        let leaseWaiters = LeaseWaiters()
        let redemptionLimiter = RedemptionLimiter(limit: configuration.maxConcurrentRefreshes)
        var executor = RefreshExecutor(
            store: store, endpoint: sts, clientId: configuration.clientId, expirySkewSeconds: configuration.expirySkewSeconds,
            limiter: redemptionLimiter, waiters: leaseWaiters, pendingRotations: PendingRotations(), metrics: metrics, logger: logger, now: now)
        executor.leaseSeconds = Double(configuration.refreshLeaseSeconds)
        let refresher = CoalescedRefresher(executor: executor)
        let tokens = SilentAcquisition(
            resolver: AccountResolver(store: store, accounts: accounts),
            cache: TokenCacheReader(store: store, memory: memory, expirySkewSeconds: configuration.expirySkewSeconds, metrics: metrics, now: now),
            refresher: refresher,
            background: BackgroundRefresher(
                refresher: refresher, authorities: authorities, memory: memory, clientCapabilities: configuration.clientCapabilities, logger: logger,
                now: now,
                forget: {
                    SilentAcquisition.forget(
                        $0, memory: memory, accounts: accounts, declinedScopes: declinedScopes, uiRequired: uiRequired, throttles: throttles)
                }),
            store: store, sts: sts, authorities: authorities, declinedScopes: declinedScopes, uiRequired: uiRequired, throttles: throttles,
            clientId: configuration.clientId,
            clientCapabilities: configuration.clientCapabilities, metrics: metrics, logger: logger, now: now,
            allowExtendedLifetime: configuration.allowExtendedLifetime)
        let grants = GrantTokenService(
            store: store, sts: sts, authorities: authorities, defaultAuthority: defaultAuthority, memory: GrantTokenMemory(), coalescer: RefreshCoalescer(),
            clientCapabilities: configuration.clientCapabilities, expirySkewSeconds: configuration.expirySkewSeconds, metrics: metrics, logger: logger,
            now: now)
        let signIns = SignInService(
            store: store, sts: sts, metadata: OpenIDMetadataCache(http: http), authorities: authorities, defaultAuthority: defaultAuthority,
            clientId: configuration.clientId, urls: urls, redirectAfterOrigins: configuration.redirectAfterOrigins,
            clientCapabilities: configuration.clientCapabilities, forgetInMemory: tokens.forgetInMemory, logger: logger, now: now,
            links: SignInStartLinks(ring: { cipher.ring }, baseURL: { urls.baseURL }, now: now))
        let downstream = DownstreamService(
            apis: configuration.downstreamAPIs, tokens: tokens, grants: grants, http: upstream, maxAttempts: configuration.maxAttempts,
            maxRetryAfterSeconds: configuration.maxRetryAfterSeconds, throttle: downstreamThrottle)
        let services = AppServices(
            configuration: configuration, store: store, tokens: tokens, grants: grants, signIns: signIns, downstream: downstream, authorities: authorities,
            health: HealthChecks(
                database: database, migrator: migrator, keyRing: ring, ciphertexts: ciphertexts,
                credential: credentialHealth),
            metrics: metrics, audit: AuditStore(database: database), issuance: IssuanceCounter(metrics: metrics))
        issuance = services.issuance!
        issuanceStore = IssuanceStore(database: database)
        metrics.addGauges {
            let stats = pool.statistics
            return [
                ("tokenrelay_db_pool_connections", ["state": "in_use"], Double(stats.inUse)),
                ("tokenrelay_db_pool_connections", ["state": "size"], Double(stats.size)),
                ("tokenrelay_db_pool_waiting", [:], Double(stats.waiting)),
                ("tokenrelay_db_pool_waits", [:], Double(stats.totalWaits)),
                ("tokenrelay_pending_rotations", [:], Double(tokens.pendingRotations.count)),
                ("tokenrelay_refreshes_in_flight", [:], Double(redemptionLimiter.inFlight)),
                ("tokenrelay_refreshes_waiting", [:], Double(redemptionLimiter.waiting + leaseWaiters.count)),
                ("tokenrelay_memory_cache_entries", [:], Double(memory.count)),
            ]
        }
        keepAlive = KeepAliveJob(
            store: KeepAliveStore(database: database, clientId: configuration.clientId), leases: JobLeaseStore(database: database),
            accounts: store, tokens: tokens,
            events: AccountEventStore(database: database), afterDays: configuration.keepAliveAfterDays,
            maxPerMinute: configuration.keepAliveMaxPerMinute, metrics: metrics, logger: logger)
        metrics.describe("tokenrelay_keepalive_total", "counter", "Refresh-token keep-alive redemptions by outcome (refreshed, failed, deferred).")
        metrics.describe("tokenrelay_webhook_deliveries_total", "counter", "Webhook delivery attempts by outcome (delivered, refused, unreachable).")
        webhooks = configuration.webhookURL.map { url in
            WebhookDeliverer(
                database: database, url: url, secret: configuration.webhookSecret ?? "", http: http,
                maxBackoffSeconds: configuration.webhookMaxBackoffSeconds, metrics: metrics, logger: logger)
        }
        let authenticator = APIKeyAuthenticator(
            bootstrapKey: configuration.bootstrapAPIKey, keys: APIKeyStore(database: database), rateLimitPerKey: configuration.rateLimitPerKey,
            cacheTTL: TimeInterval(configuration.cacheTTLSeconds))
        self.authenticator = authenticator
        let invalidation = ReplicaInvalidation(metrics: metrics, logger: logger)
        self.invalidation = invalidation
        invalidation.onAccountForgotten(tokens.forgetInMemory)
        invalidation.onAccessTokensReplaced { memory.removeAll(accountId: $0) }
        invalidation.onAPIKeyRevoked(authenticator.forget(keyId:))
        invalidation.onRefreshReleased(leaseWaiters.wake(accountId:))
        invalidation.onResynchronise {
            accounts.removeAll()
            authenticator.forgetAll()
            memory.removeAll()
        }
        metrics.addGauges {
            [("tokenrelay_invalidation_listening", [:], invalidation.isListening ? 1 : 0)]
        }
        let router = Routes.make(services)
        routeTable = router.openAPIOperations
        routeAccess = router.routes.map { ($0.method, $0.template, $0.access) }
        let handler = AppHTTPHandler(
            router: router, authenticator: authenticator,
            services: services, logger: logger)
        server = HTTPServer(
            configuration: HTTPServerConfiguration(
                host: configuration.listenHost, port: configuration.listenPort, threadCount: configuration.serverThreads,
                maxBodyBytes: configuration.maxBodyBytes, maxConnections: configuration.maxConnections,
                connectionTimeoutSeconds: configuration.clientTimeoutSeconds, requestHeadTimeoutSeconds: configuration.clientTimeoutSeconds),
            handler: handler)
    }

    /// Applies migrations when configured, then serves. Returns the bound port.
    public func start() async throws -> Int {
        if configuration.migrateOnStart, let migrator {
            let applied = try await migrator.apply(on: pool)
            logger.info("migrate.applied", ["migrations.count": String(applied.count)])
        }
        invalidation.start(url: configuration.databaseListenURL ?? configuration.databaseURL)
        try server.start()
        urls.serverStarted(port: server.port)
        logger.info("service.listening", ["listen.host": configuration.listenHost, "listen.port": String(server.port)])
        startBackgroundJobs()
        return server.port
    }

    /// Runs one refresh-token keep-alive pass now (`token-relay keepalive --once`).
    /// - Returns: the pass summary as one JSON object (`ran`, `refreshed`, `failed`, `deferred`).
    /// - Throws: `Problem` when the database fails.
    public func runKeepAlivePass() async throws -> String {
        do { return try await keepAlive.runPass().json } catch let error as Problem { throw ServiceError(description: error.detail) } catch let error
            as StoreError
        {
            throw ServiceError(description: Problem(error).detail)
        }
    }

    private func startBackgroundJobs() {
        var jobs: [Task<Void, Never>] = []
        if configuration.keepAliveAfterDays > 0 {
            let keepAlive = self.keepAlive
            let interval = Double(configuration.keepAliveIntervalSeconds)
            let logger = self.logger
            jobs.append(
                Task {
                    // Replicas started together do not all reach for the lease at once.
                    try? await Task.sleep(for: .seconds(Double.random(in: 10..<70)))
                    while !Task.isCancelled {
                        do { _ = try await keepAlive.runPass() } catch { logger.warn("keepalive.pass_failed", ["error": String(describing: type(of: error))]) }
                        try? await Task.sleep(for: .seconds(interval * Double.random(in: 0.8..<1.2)))
                    }
                })
        }
        if let webhooks {
            let job = Task { await webhooks.run() }
            webhookJob.withLock { $0 = job }
            jobs.append(job)
        }
        let (issuance, store, interval) = (self.issuance, issuanceStore, configuration.issuanceFlushIntervalSeconds)
        jobs.append(Task { await issuance.run(store: store, intervalSeconds: interval) })
        backgroundJobs.withLock { $0 = jobs }
    }

    /// Replaces the encryption key ring (SIGHUP, SPEC §11): new tokens are sealed under its first
    /// key; stored tokens open under any of its keys.
    public func reloadKeyRing(_ ring: KeyRing) {
        cipher.reload(ring)
        logger.info("encryption.key_ring_reloaded", ["key_id": ring.primary.id, "keys.count": String(ring.keys.count)])
    }

    /// Takes the client credential the configuration names now (SIGHUP, SPEC §11: a rotated
    /// secret or certificate file is used without a restart).
    /// - Throws: `ConfigurationError` naming the setting that cannot be used; the credential in
    ///   use stays.
    public func reloadCredential(_ configuration: Configuration) throws {
        try credential.reload(from: configuration)
        Self.noteExpiry(of: credential, secretExpiresAt: configuration.clientSecretExpiresAt, in: credentialHealth)
        logger.info("credential.reloaded", [:])
    }

    /// Tells readiness when the credential in use expires (SPEC §12 Health: warn 14 days before):
    /// the certificate's notAfter, or `TOKENRELAY_CLIENT_SECRET_EXPIRES_AT` for a secret.
    private static func noteExpiry(of credential: ClientCredential, secretExpiresAt: Date?, in health: CredentialHealth) {
        switch credential.kind {
        case .secret: health.expiresAt(secretExpiresAt, credential: "client secret")
        case .certificate(_, let certificate, _):
            health.expiresAt(Date(timeIntervalSince1970: TimeInterval(certificate.notAfter)), credential: "client certificate")
        case .none, .assertionFile: health.expiresAt(nil)
        }
    }

    /// Writes this process's encryption counts to the database (at shutdown; readiness probes
    /// do it meanwhile). Best effort.
    public func flushKeyUsage() async {
        _ = try? await ciphertexts.flushUsage()
    }

    /// Graceful stop (SIGTERM): stops accepting connections, lets in-flight requests finish for
    /// up to `TOKENRELAY_SHUTDOWN_TIMEOUT_S`, writes the token issuance counts and key usage still
    /// in memory, then closes the rest, the listener and the pool.
    /// - Returns: whether every in-flight request finished in time.
    @discardableResult
    public func shutdown() async -> Bool {
        let drained = server.drain(timeoutSeconds: Double(configuration.shutdownTimeoutSeconds))
        await issuance.flush(to: issuanceStore)
        await flushKeyUsage()
        // A webhook POST in flight is cut off; the loop then releases its lease, so another
        // replica delivers at once rather than when the lease expires.
        if let job = webhookJob.withLock({ $0 }) {
            job.cancel()
            await job.value
        }
        stop()
        return drained
    }

    public func stop() {
        invalidation.stop()
        for job in backgroundJobs.withLock({ $0 }) { job.cancel() }

        server.stop()
        http.shutdown()
        pool.close()
    }
}
