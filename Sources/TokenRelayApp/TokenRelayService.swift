import Foundation
import HTTPClientBridge
import HTTPServerBridge
import IdentityCore
import PostgresBridge

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
    /// Every route served, as (method, OpenAPI path template): the OpenAPI parity test reads it.
    public let routeTable: [(method: String, path: String)]

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
        let store = TokenStore(database: database, clientId: configuration.clientId, cipher: TokenCipher(ring: ring))
        let upstream = RetryingHTTPClient(http: http, metrics: metrics, logger: logger)
        let sts = STSClient(
            http: upstream, clientId: configuration.clientId, clientSecret: configuration.clientSecret, maxAttempts: configuration.maxAttempts,
            maxRetryAfterSeconds: configuration.maxRetryAfterSeconds, metrics: metrics)
        let memory = MemoryTokenCache()
        let accounts = AccountCache(ttl: TimeInterval(configuration.cacheTTLSeconds))
        let tokens = SilentTokenService(
            store: store, sts: sts, authorities: authorities, memory: memory, accounts: accounts, declinedScopes: DeclinedScopesMemory(),
            coalescer: RefreshCoalescer(),
            clientId: configuration.clientId,
            clientCapabilities: configuration.clientCapabilities, expirySkewSeconds: configuration.expirySkewSeconds, metrics: metrics,
            logger: logger, now: now)
        let signIns = SignInService(
            store: store, sts: sts, metadata: OpenIDMetadataCache(http: http), authorities: authorities, defaultAuthority: defaultAuthority,
            clientId: configuration.clientId, urls: urls, redirectAfterOrigins: configuration.redirectAfterOrigins,
            clientCapabilities: configuration.clientCapabilities, forgetInMemory: tokens.forgetInMemory, logger: logger, now: now)
        let downstream = DownstreamService(
            apis: configuration.downstreamAPIs, tokens: tokens, http: upstream, maxAttempts: configuration.maxAttempts,
            maxRetryAfterSeconds: configuration.maxRetryAfterSeconds)
        let services = AppServices(
            configuration: configuration, store: store, tokens: tokens, signIns: signIns, downstream: downstream, authorities: authorities,
            health: HealthChecks(database: database, migrator: migrator, keyRing: ring), metrics: metrics, audit: AuditStore(database: database))
        metrics.addGauges {
            let stats = pool.statistics
            return [
                ("tokenrelay_db_pool_connections", ["state": "in_use"], Double(stats.inUse)),
                ("tokenrelay_db_pool_connections", ["state": "size"], Double(stats.size)),
                ("tokenrelay_db_pool_waiting", [:], Double(stats.waiting)),
                ("tokenrelay_db_pool_waits", [:], Double(stats.totalWaits)),
                ("tokenrelay_pending_rotations", [:], Double(tokens.pendingRotations.count)),
                ("tokenrelay_memory_cache_entries", [:], Double(memory.count)),
            ]
        }
        let authenticator = APIKeyAuthenticator(
            bootstrapKey: configuration.bootstrapAPIKey, keys: APIKeyStore(database: database), cacheTTL: TimeInterval(configuration.cacheTTLSeconds))
        let invalidation = ReplicaInvalidation(metrics: metrics, logger: logger)
        self.invalidation = invalidation
        invalidation.onAccountForgotten(tokens.forgetInMemory)
        invalidation.onAccessTokensReplaced { memory.removeAll(accountId: $0) }
        invalidation.onAPIKeyRevoked(authenticator.forget(keyId:))
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
        let handler = AppHTTPHandler(
            router: router, authenticator: authenticator,
            services: services, logger: logger)
        server = HTTPServer(
            configuration: HTTPServerConfiguration(
                host: configuration.listenHost, port: configuration.listenPort, threadCount: configuration.serverThreads,
                maxBodyBytes: configuration.maxBodyBytes, maxConnections: configuration.maxConnections),
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
        return server.port
    }

    /// Graceful stop (SIGTERM): stops accepting connections, lets in-flight requests finish for
    /// up to `TOKENRELAY_SHUTDOWN_TIMEOUT_S`, then closes the rest, the listener and the pool.
    /// - Returns: whether every in-flight request finished in time.
    @discardableResult
    public func shutdown() -> Bool {
        let drained = server.drain(timeoutSeconds: Double(configuration.shutdownTimeoutSeconds))
        stop()
        return drained
    }

    public func stop() {
        invalidation.stop()
        server.stop()
        http.shutdown()
        pool.close()
    }
}
