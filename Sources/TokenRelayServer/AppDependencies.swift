import Foundation
import HTTPClientBridge
import HTTPServerBridge
import IdentityCore
import PostgresBridge
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayOperations
import TokenRelaySignIn
import TokenRelayStore
import TokenRelayUpstream

/// Every object the service is made of, built once from the configuration: stores, memories,
/// clients, the route table and handler, and the background jobs as ``Service``s.
///
/// Two forms: ``live(configuration:logger:)`` for `token-relay serve` (with the HTTP server), and
/// ``test(databaseURL:authority:clientId:clientSecret:logger:configure:)`` for tests that drive
/// ``handler`` in memory against a real PostgreSQL and the emulator (no HTTP server; signals are
/// the ``ServiceGroup``'s, which such a test does not run). Nothing here starts: ``services()``
/// gives what a group runs, ``close()`` what a caller without a group must call.
package struct AppDependencies: Sendable {
    package let configuration: Configuration
    package let logger: Logger
    /// The one reading of time of the service's own time facts (token expiry, memories, leases,
    /// sign-in expiry, issuance counts), a ``TestClock``'s in tests. Deadlines, sleeps and
    /// Retry-After, which bound real waiting, and the times another party checks against its own
    /// clock (client assertions, webhook signatures) read ``RelayClock/system``.
    package let clock: RelayClock
    package let metrics: Metrics
    package let pool: PostgresPool
    package let http: HTTPClient
    package let migrator: Migrator?
    package let urls: PublicURLs
    package let cipher: TokenCipher
    /// Per-tenant data keys under the key-encryption keys (ADR 0017).
    package let dataKeys: TenantDataKeys
    package let ciphertexts: CiphertextStore
    package let credential: ClientCredential
    package let credentialHealth: CredentialHealth
    /// What route handlers call.
    package let services: AppServices
    /// API-key authentication; `authenticator.forget(keyId:)` drops a revoked key from this replica's memory.
    package let authenticator: APIKeyAuthenticator
    package let router: Router
    /// Turns requests into route calls; the HTTP server's handler, or a test's.
    package let handler: AppHTTPHandler
    package let invalidation: ReplicaInvalidation
    /// Reads the suspended tenants into memory (before serving, then periodically; behaviour §12 Tenants).
    package let tenantReloader: TenantSuspensionReloader
    package let keepAlive: KeepAliveJob
    /// Counts accounts by state and failure class for `tokenrelay_accounts` (behaviour §3.8).
    package let accountHealth: AccountHealthGauge
    /// Nil when `TOKENRELAY_WEBHOOK_URL` is unset.
    package let webhooks: WebhookDeliverer?
    /// Token answers per (key, account), flushed in batches (behaviour §12 Audit).
    package let issuance: IssuanceCounter
    /// Work no request awaits to its end (refreshes, touches, lease releases, rotations not
    /// stored yet), drained at shutdown before the pool closes.
    package let backgroundTasks: BackgroundTasks
    /// The refresh engine (ADR 0012); its leases still held after the drain are released at shutdown.
    package let refreshExecutor: RefreshExecutor
    package let issuanceStore: IssuanceStore
    /// Serves ``handler``; nil in the test form.
    package let server: HTTPServer?
    /// `/healthz`, `/readyz` and `/metrics` when `TOKENRELAY_MANAGEMENT_LISTEN` names an address
    /// of their own; nil otherwise (they are ``router``'s then).
    package let managementRouter: Router?
    /// Serves ``managementRouter``; nil in the test form or without the setting.
    package let managementServer: HTTPServer?
    /// Where spans wait for export, and the service that sends them (behaviour §8.11); nil
    /// when `TOKENRELAY_OTLP_ENDPOINT` is unset.
    package let tracer: Tracer?
    package let traceExporter: OTLPTraceExporter?

    /// Everything `token-relay serve` runs, the HTTP server included.
    /// - Throws: `ConfigurationError` when a setting cannot be used (authority, key ring, credential, migrations).
    package static func live(configuration: Configuration, logger: Logger) throws -> AppDependencies {
        try AppDependencies(configuration: configuration, logger: logger, clock: .system, serving: true)
    }

    /// Everything but the HTTP server, for in-process tests: the handler answers requests in
    /// memory against the database at `databaseURL` and the authority (the emulator's).
    /// - Parameters:
    ///   - databaseURL: a migrated database (`TOKENRELAY_TEST_DATABASE_URL`).
    ///   - authority: e.g. `http://127.0.0.1:PORT/{tenant}`; its origin is a known authority and
    ///     loopback http is allowed.
    ///   - clientId: the app registration's client id. Default `TokenRelayStack.clientId`.
    ///   - clientSecret: the client secret. Default none.
    ///   - logger: Default: errors only, kept in memory.
    ///   - configure: changes to the rest of the configuration (a random key ring, port 0,
    ///     pool of 4 otherwise).
    ///   - clock: the time of tokens and memories. Default the system's.
    /// - Throws: `ConfigurationError` when a setting cannot be used.
    package static func test(
        databaseURL: String, authority: String, clientId: String = "6731de76-14a6-49ae-97bc-6eba6914391e", clientSecret: String? = nil,
        logger: Logger = Logger(level: .error, logPII: false, sink: .memory()), clock: RelayClock = .system,
        configure: (inout Configuration) -> Void = { _ in }
    ) throws -> AppDependencies {
        var configuration = Configuration()
        configuration.database.url = databaseURL
        configuration.database.poolSize = 4
        configuration.identity.clientId = clientId
        configuration.identity.authority = authority
        configuration.identity.allowHTTPLoopback = true
        if let url = URLComponents(string: authority), let scheme = url.scheme, let host = url.host {
            configuration.identity.knownAuthorities = [scheme + "://" + host + (url.port.map { ":\($0)" } ?? "")]
        }
        configuration.credential.secret = clientSecret
        configuration.encryption.keys = KeyRing.generateEntry(id: "test1")
        configuration.http.listenPort = 0
        configure(&configuration)
        return try AppDependencies(configuration: configuration, logger: logger, clock: clock, serving: false)
    }

    private init(configuration: Configuration, logger: Logger, clock: RelayClock, serving: Bool) throws {
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
        let metrics = Metrics()
        metrics.describeOperations()
        metrics.describeProcess()
        self.metrics = metrics
        let pool = PostgresPool(url: configuration.database.url, size: configuration.database.poolSize)
        self.pool = pool
        let http = HTTPClient()
        self.http = http
        let tracing = configuration.tracing
        let tracer = tracing.endpoint.map { _ in Tracer(capacity: tracing.queueSpans, metrics: metrics) }
        self.tracer = tracer
        traceExporter = tracer.flatMap { tracer in
            tracing.endpoint.map { endpoint in
                OTLPTraceExporter(
                    tracer: tracer, endpoint: endpoint, http: http, serviceName: tracing.serviceName, intervalMilliseconds: tracing.intervalMilliseconds,
                    graceSeconds: Double(configuration.http.shutdownTimeoutSeconds), metrics: metrics, logger: logger)
            }
        }
        let database = Database(pool: pool)
        let ring: KeyRing
        do { ring = try KeyRing(parsing: configuration.encryption.keys) } catch {
            throw ConfigurationError(setting: "TOKENRELAY_ENCRYPTION_KEYS", reason: String(describing: error))
        }
        let identity = configuration.identity
        let authorities: AuthorityValidator
        let defaultAuthority: Authority
        do {
            authorities = try AuthorityValidator(
                knownAuthorities: identity.knownAuthorities, allowHTTPLoopback: identity.allowHTTPLoopback, defaultAuthority: identity.authority)
            defaultAuthority = try authorities.validate(identity.authority)
        } catch {
            throw ConfigurationError(setting: "TOKENRELAY_AUTHORITY", reason: error.detail)
        }
        let migrator = try Migrator.locateDirectory(configured: configuration.database.migrationsDirectory).map { try Migrator(directory: $0) }
        self.migrator = migrator

        let urls = PublicURLs(configuration: configuration)
        self.urls = urls
        let now: @Sendable () -> Int = { clock.seconds }
        let hsmKeys = try configuration.encryption.pkcs11.map(HSMKeys.open) ?? []
        let dataKeys = TenantDataKeys(
            store: DataKeyStore(database: database), keys: KeyEncryptionKeys(ring: ring, hsm: hsmKeys),
            capacity: configuration.encryption.dataKeyCapacity, holdSeconds: Double(configuration.encryption.dataKeyHoldSeconds), clock: clock)
        self.dataKeys = dataKeys
        let cipher = TokenCipher(ring: ring, dataKeys: dataKeys)
        self.cipher = cipher
        let store = TokenStore(database: database, clientId: identity.clientId, cipher: cipher)
        let ciphertexts = CiphertextStore(database: database, clientId: identity.clientId, cipher: cipher)
        self.ciphertexts = ciphertexts
        // Real time: the retry loop's reads bound real waits (deadlines, Retry-After, backoff), and
        // the STS checks the client assertion's times against its own clock.
        let upstream = RetryingHTTPClient(http: http, metrics: metrics, logger: logger, clock: .system)
        let credential = try ClientCredential(configuration: configuration)
        self.credential = credential
        // Per replica: each replica learns from its own token-endpoint answers (behaviour §12 Health).
        let credentialHealth = CredentialHealth(metrics: metrics, clock: clock, credential: credential)
        self.credentialHealth = credentialHealth
        let tokenSettings = configuration.tokens
        let sts = STSClient(
            http: upstream, clientId: identity.clientId, credential: credential, maxAttempts: tokenSettings.maxAttempts,
            maxRetryAfterSeconds: tokenSettings.maxRetryAfterSeconds, metrics: metrics, credentialHealth: credentialHealth)
        let memoryBytes = tokenSettings.memoryCacheMegabytes << 20
        let memory = MemoryTokenCache(capacityBytes: memoryBytes / 4 * 3)
        let accounts = AccountCache(ttl: TimeInterval(tokenSettings.cacheTTLSeconds), capacityBytes: memoryBytes / 4, clock: clock)
        let uiRequired = UIRequiredMemory(ttlSeconds: tokenSettings.uiRequiredTTLSeconds)
        let declinedScopes = DeclinedScopesMemory()
        let downstreamThrottle = ThrottleMemory()
        let throttles = [sts.throttle, downstreamThrottle]
        let leaseWaiters = LeaseWaiters()
        let suspensions = TenantSuspensions()
        let grantMemory = GrantTokenMemory()
        // Every per-replica memory of accounts and tenants, forgotten through one object.
        let memories = ReplicaMemory(
            tokens: memory, accounts: accounts, uiRequired: uiRequired, declinedScopes: declinedScopes, throttles: throttles, grantTokens: grantMemory)
        let redemptionLimiter = RedemptionLimiter(limit: tokenSettings.maxConcurrentRefreshes)
        let backgroundTasks = BackgroundTasks(graceSeconds: Double(configuration.http.shutdownTimeoutSeconds), logger: logger)
        self.backgroundTasks = backgroundTasks
        var executor = RefreshExecutor(
            store: store, endpoint: sts, clientId: identity.clientId, expirySkewSeconds: tokenSettings.expirySkewSeconds,
            limiter: redemptionLimiter, waiters: leaseWaiters, pendingRotations: PendingRotations(), tasks: backgroundTasks, metrics: metrics,
            logger: logger, now: now)
        executor.leaseSeconds = Double(tokenSettings.refreshLeaseSeconds)
        refreshExecutor = executor
        let refresher = CoalescedRefresher(executor: executor)
        let tokens = SilentAcquisition(
            resolver: AccountResolver(store: store, accounts: accounts),
            cache: TokenCacheReader(store: store, memory: memory, expirySkewSeconds: tokenSettings.expirySkewSeconds, metrics: metrics, now: now),
            refresher: refresher,
            background: BackgroundRefresher(
                refresher: refresher, authorities: authorities, memory: memory, clientCapabilities: identity.clientCapabilities, logger: logger,
                now: now, forget: memories.forget(account:)),
            memories: memories, store: store, sts: sts, authorities: authorities,
            clientId: identity.clientId,
            clientCapabilities: identity.clientCapabilities, metrics: metrics, logger: logger, now: now,
            allowExtendedLifetime: tokenSettings.allowExtendedLifetime, suspensions: suspensions)
        let grants = GrantTokenService(
            store: store, sts: sts, authorities: authorities, defaultAuthority: defaultAuthority, memory: grantMemory,
            coalescer: RefreshCoalescer(tasks: backgroundTasks),
            clientCapabilities: identity.clientCapabilities, expirySkewSeconds: tokenSettings.expirySkewSeconds, metrics: metrics, logger: logger,
            now: now, suspensions: suspensions)
        // A suspension forgets what memory holds of the tenant (behaviour §12 Tenants); the
        // refusal itself does not depend on it.
        suspensions.onSuspended(memories.forget(tenant:))
        let tenantStore = TenantStore(database: database, clientId: identity.clientId)
        let tenantReloader = TenantSuspensionReloader(
            store: tenantStore, suspensions: suspensions, intervalSeconds: tokenSettings.cacheTTLSeconds, logger: logger)
        self.tenantReloader = tenantReloader
        let invalidation = ReplicaInvalidation(metrics: metrics, logger: logger)
        self.invalidation = invalidation
        var signIns = SignInService(
            store: store, sts: sts, metadata: OpenIDMetadataCache(http: http, clock: clock), authorities: authorities, defaultAuthority: defaultAuthority,
            clientId: identity.clientId, urls: urls, redirectAfterOrigins: identity.redirectAfterOrigins,
            clientCapabilities: identity.clientCapabilities, forgetInMemory: memories.forget(account:), logger: logger, now: now,
            links: SignInStartLinks(ring: { cipher.ring }, baseURL: { urls.baseURL }, now: now))
        signIns.notificationsFlow = { invalidation.isListening }
        let signInFollowers = signIns.followers
        let downstream = DownstreamService(
            apis: configuration.downstream.apis, publicBaseURL: { urls.baseURL }, tokens: tokens, grants: grants, http: upstream,
            maxAttempts: tokenSettings.maxAttempts,
            maxRetryAfterSeconds: tokenSettings.maxRetryAfterSeconds, throttle: downstreamThrottle)
        let issuance = IssuanceCounter(metrics: metrics, clock: clock)
        self.issuance = issuance
        issuanceStore = IssuanceStore(database: database)
        let events = AccountEventStore(database: database)
        let services = AppServices(
            configuration: configuration, store: store, events: events, tokens: tokens, grants: grants, signIns: signIns, downstream: downstream,
            authorities: authorities,
            health: HealthChecks(
                database: database, migrator: migrator, keyRing: ring, ciphertexts: ciphertexts, credential: credentialHealth, metrics: metrics, clock: clock),
            metrics: metrics, audit: AuditStore(database: database), issuance: issuance, tenants: tenantStore, suspensions: suspensions,
            cursors: PageCursor.signer(ring: { cipher.ring }),
            tracer: tracer)
        self.services = services
        metrics.addGauges {
            let stats = pool.statistics
            return [
                ("tokenrelay_db_pool_connections", ["state": "in_use"], Double(stats.inUse)),
                ("tokenrelay_db_pool_connections", ["state": "size"], Double(stats.size)),
                ("tokenrelay_db_pool_waiting", [:], Double(stats.waiting)),
                ("tokenrelay_db_pool_waits_total", [:], Double(stats.totalWaits)),
                ("tokenrelay_db_pool_waits", [:], Double(stats.totalWaits)),
                ("tokenrelay_pending_rotations", [:], Double(tokens.pendingRotations.count)),
                ("tokenrelay_refreshes_in_flight", [:], Double(redemptionLimiter.inFlight)),
                ("tokenrelay_refreshes_waiting", [:], Double(redemptionLimiter.waiting + leaseWaiters.count)),
                ("tokenrelay_sign_in_followers", [:], Double(signInFollowers.count)),
            ] + Self.memoryGauges(memories.usage)
        }
        accountHealth = AccountHealthGauge(
            store: store, metrics: metrics, intervalSeconds: configuration.http.accountHealthIntervalSeconds, logger: logger)
        keepAlive = KeepAliveJob(
            store: KeepAliveStore(database: database, clientId: identity.clientId), leases: JobLeaseStore(database: database), accounts: store,
            tokens: tokens, events: events, afterDays: configuration.keepAlive.afterDays, maxPerMinute: configuration.keepAlive.maxPerMinute,
            intervalSeconds: configuration.keepAlive.intervalSeconds, eventsRetentionDays: configuration.webhooks.eventsRetentionDays,
            keepUndeliveredEvents: configuration.webhooks.url != nil, audit: AuditStore(database: database),
            auditRetentionDays: configuration.webhooks.auditRetentionDays, metrics: metrics, logger: logger)
        metrics.describe(
            "tokenrelay_events_pruned_total", "counter", "Account events deleted as older than TOKENRELAY_EVENTS_RETENTION_DAYS.", series: [[:]])
        metrics.describe(
            "tokenrelay_audit_pruned_total", "counter",
            "Audit rows, token provenance and token receipts deleted as older than TOKENRELAY_AUDIT_RETENTION_DAYS, by table.",
            series: ["audit_events", "token_provenance", "token_receipts"].map { ["table": $0] })
        metrics.describe(
            "tokenrelay_keepalive_total", "counter", "Refresh-token keep-alive redemptions by outcome (refreshed, failed, deferred).",
            series: ["refreshed", "failed", "deferred"].map { ["outcome": $0] })
        metrics.describe(
            "tokenrelay_webhook_deliveries_total", "counter", "Webhook delivery attempts by outcome (delivered, refused, unreachable).",
            series: ["delivered", "refused", "unreachable"].map { ["outcome": $0] })
        webhooks = configuration.webhooks.url.map { url in
            WebhookDeliverer(
                database: database, url: url, secret: configuration.webhooks.secret ?? "", http: http,
                maxBackoffSeconds: configuration.webhooks.maxBackoffSeconds, metrics: metrics, logger: logger)
        }
        let keyStore = APIKeyStore(database: database)
        let keyDirectory = KeyDirectory { invalidation.isListening }
        let authenticator = APIKeyAuthenticator(
            bootstrapKey: configuration.apiKeys.bootstrapKey, keys: keyStore, rateLimitPerKey: configuration.limits.rateLimitPerKey,
            cacheTTL: TimeInterval(tokenSettings.cacheTTLSeconds), directory: keyDirectory, clock: clock)
        self.authenticator = authenticator
        // Loaded each time notifications start flowing, so no creation falls between (behaviour §7.1).
        invalidation.onListening {
            keyDirectory.invalidate()
            backgroundTasks.start { await keyDirectory.load { try await keyStore.activeKeyIds(limit: $0) } }
        }
        invalidation.onAPIKeyCreated(authenticator.keyCreated)
        invalidation.onAccountForgotten(memories.forget(account:))
        invalidation.onAccessTokensReplaced(memories.forgetAccessTokens(of:))
        invalidation.onAPIKeyRevoked(authenticator.keyRevoked)
        invalidation.onRefreshReleased(leaseWaiters.wake(accountId:))
        invalidation.onSignInFinished(signInFollowers.wake(signInId:))
        invalidation.onTenantChanged { suspensions.apply(tenantId: $0, suspended: $1) }
        // The data key and what memory holds of the tenant go (ADR 0017); its accounts' own
        // `account.deleted` messages follow.
        invalidation.onTenantForgotten { tenant in
            dataKeys.drop(tenantId: tenant)
            memories.forget(tenant: tenant)
        }
        invalidation.onResynchronise {
            dataKeys.dropAll()
            memories.removeAll()
            authenticator.forgetAll()
            signInFollowers.wakeAll()
            backgroundTasks.startIfRoom { await tenantReloader.reload() }
        }
        metrics.addGauges {
            [("tokenrelay_tenants_suspended", [:], Double(suspensions.tenants.count))]
        }
        metrics.addGauges {
            [("tokenrelay_invalidation_listening", [:], invalidation.isListening ? 1 : 0)]
        }
        let separateManagement = configuration.http.managementPort != nil
        let router = Routes.make(services, operations: !separateManagement)
        self.router = router
        let handler = AppHTTPHandler(router: router, authenticator: authenticator, services: services, logger: logger)
        self.handler = handler
        let managementRouter = separateManagement ? Routes.management(services) : nil
        self.managementRouter = managementRouter
        managementServer = managementRouter.flatMap { router in
            guard serving, let host = configuration.http.managementHost, let port = configuration.http.managementPort else { return nil }
            // Few connections (Prometheus, the kubelet); the API's body and time limits.
            return HTTPServer(
                configuration: HTTPServerConfiguration(
                    host: host, port: port, threadCount: 1, maxBodyBytes: configuration.limits.maxBodyBytes, maxConnections: 64,
                    connectionTimeoutSeconds: configuration.http.clientTimeoutSeconds, requestHeadTimeoutSeconds: configuration.http.clientTimeoutSeconds),
                handler: AppHTTPHandler(router: router, authenticator: authenticator, services: services, logger: logger))
        }
        server =
            serving
            ? HTTPServer(
                configuration: HTTPServerConfiguration(
                    host: configuration.http.listenHost, port: configuration.http.listenPort, threadCount: configuration.http.serverThreads,
                    maxBodyBytes: configuration.limits.maxBodyBytes, maxConnections: configuration.limits.maxConnections,
                    connectionTimeoutSeconds: configuration.http.clientTimeoutSeconds,
                    requestHeadTimeoutSeconds: configuration.http.clientTimeoutSeconds),
                handler: handler) : nil
    }

    /// `tokenrelay_memory_cache_{bytes,entries,evictions_total}{cache}`, and `…_evictions` (the same
    /// total under its old name, a gauge), each family's samples together (the text exposition
    /// needs them in one group).
    package static func memoryGauges(_ usages: [String: MemoryUsage]) -> [(String, [String: String], Double)] {
        let caches = usages.keys.sorted()
        let families = [("bytes", \MemoryUsage.bytes), ("entries", \.entries), ("evictions_total", \.evictions), ("evictions", \.evictions)]
        return families.flatMap { suffix, field in
            caches.map { ("tokenrelay_memory_cache_" + suffix, ["cache": $0], Double(usages[$0]![keyPath: field])) }
        }
    }

    /// The services a ``ServiceGroup`` runs, in start order (they stop in the reverse): the
    /// pool and clients close last; just before, the trace exporter sends the spans still queued
    /// (``OTLPTraceExporter/beginGrace()``); before it the background tasks drain (within the shutdown
    /// grace: ``BackgroundTasks/beginGrace()``); the invalidation listener; the keep-alive job
    /// (always: its pass also prunes old events) and the webhook job (when configured); the
    /// key-usage and issuance flushes; the readiness self-check; the account-health count; the management listener (when
    /// configured); the HTTP server (when this form has one) first to stop, so a shutdown stops
    /// accepting, lets requests in flight finish, writes the counts, stops the jobs and closes the
    /// pool, in that order (the management listener answers probes and scrapes until the API has
    /// drained).
    /// - Parameter onListening: called with the bound port once the HTTP server accepts.
    package func services(onListening: @escaping @Sendable (Int) -> Void = { _ in }) -> [any Service] {
        // Stopped in reverse: the leases still held are released after the background drain
        // (a redemption given up then) and before the pool closes.
        let executor = refreshExecutor
        var services: [any Service] = [OnStop("Resources", close)]
        // Stopped after everything that makes spans, before the HTTP client closes.
        if let traceExporter { services.append(traceExporter) }
        services += [OnStop("RefreshLeases") { await executor.releaseHeldLeases() }, backgroundTasks]
        services.append(InvalidationListener(invalidation: invalidation, url: configuration.database.listenURL ?? configuration.database.url))
        services.append(tenantReloader)
        // Always: besides keep-alive (when on), its pass prunes old events (issue 10 item 12).
        services.append(keepAlive)
        if let webhooks { services.append(webhooks) }
        services.append(KeyUsageFlusher(store: ciphertexts, intervalSeconds: configuration.tokens.issuanceFlushIntervalSeconds))
        services.append(IssuanceFlusher(counter: issuance, store: issuanceStore, intervalSeconds: configuration.tokens.issuanceFlushIntervalSeconds))
        services.append(ReadinessSelfCheck(health: self.services.health, intervalSeconds: configuration.http.readinessCheckIntervalSeconds))
        services.append(accountHealth)
        if let managementServer {
            let (logger, host) = (self.logger, configuration.http.managementHost ?? "")
            services.append(
                HTTPServerService(
                    name: "ManagementHTTPServer", server: managementServer, drainTimeoutSeconds: configuration.http.shutdownTimeoutSeconds, logger: logger
                ) { port in
                    logger.info("service.listening", ["listen.host": host, "listen.port": String(port), "listen.role": "management"])
                })
        }
        if let server {
            let urls = self.urls
            let (logger, host) = (self.logger, configuration.http.listenHost)
            services.append(
                HTTPServerService(server: server, drainTimeoutSeconds: configuration.http.shutdownTimeoutSeconds, logger: logger) { port in
                    urls.serverStarted(port: port)
                    // replica.id names this process in lease owners (`token.lease_taken_over`'s lease.previous_holder).
                    logger.info(
                        "service.listening",
                        ["listen.host": host, "listen.port": String(port), "listen.role": "api", "replica.id": ReplicaInvalidation.origin])
                    onListening(port)
                })
        }
        return services
    }

    /// Stops the listener and the HTTP server (if started) and closes the HTTP client and the
    /// pool. Idempotent; what a caller that runs no ``ServiceGroup`` calls when done.
    package func close() {
        invalidation.stop()
        server?.stop()
        managementServer?.stop()
        http.shutdown()
        pool.close()
    }
}
