import Foundation

/// TokenRelay's settings (behaviour §11), nested by concern. Every property documents its default and
/// unit; names of the environment variables are part of the contract (`TOKENRELAY_` + the
/// upper-cased JSON name), and each property names its own.
public struct Configuration: Sendable {
    /// Where and how HTTP is served.
    public var http = HTTP()
    /// PostgreSQL: the pool, the LISTEN connection, migrations.
    public var database = Database()
    /// The app registration and the authorities it signs in at.
    public var identity = Identity()
    /// The confidential client credential (re-read on SIGHUP).
    public var credential = Credential()
    /// Tokens at rest (re-read on SIGHUP).
    public var encryption = Encryption()
    /// API keys accepted besides the stored ones.
    public var apiKeys = APIKeys()
    /// Token acquisition: expiry, refresh, retries, memories.
    public var tokens = Tokens()
    /// Bounds per request and per caller.
    public var limits = Limits()
    /// Refresh-token keep-alive.
    public var keepAlive = KeepAlive()
    /// Account-event webhooks.
    public var webhooks = Webhooks()
    /// Downstream APIs called for a user or the app (behaviour §6).
    public var downstream = Downstream()
    /// Log level and personal data.
    public var logging = Logging()
    /// OpenTelemetry trace export (behaviour §8.11).
    public var tracing = Tracing()

    public init() {}

    /// Where and how HTTP is served.
    public struct HTTP: Sendable {
        /// Host to serve on (`TOKENRELAY_LISTEN`, `host:port`). Default `127.0.0.1`.
        public var listenHost: String = "127.0.0.1"
        /// Port to serve on (`TOKENRELAY_LISTEN`); 0 lets the kernel pick. Default 8080.
        public var listenPort: Int = 8080
        /// Server threads answering requests (`TOKENRELAY_SERVER_THREADS`). Default: the number of cores.
        public var serverThreads: Int = max(1, ProcessInfo.processInfo.activeProcessorCount)
        /// Seconds a client connection may stay silent (while sending its request, or idle between
        /// keep-alive requests), and may take to send a whole request (head and body) however it
        /// trickles the bytes, before it is closed (`TOKENRELAY_CLIENT_TIMEOUT_S`). Default 30.
        public var clientTimeoutSeconds: Int = 30
        /// Seconds in-flight requests get to finish after SIGTERM before the server closes them
        /// (`TOKENRELAY_SHUTDOWN_TIMEOUT_S`). Default 10.
        public var shutdownTimeoutSeconds: Int = 10
        /// The base URL callers and browsers use, behind a proxy (`TOKENRELAY_PUBLIC_BASE_URL`).
        /// Default `http://{listen}`.
        public var publicBaseURL: String?
        /// Where `/healthz`, `/readyz` and `/metrics` are served instead of the API's address
        /// (`TOKENRELAY_MANAGEMENT_LISTEN`, `host:port`; port 0 lets the kernel pick), so a
        /// NetworkPolicy or firewall can keep callers off them. Default nil: on the API's address.
        public var managementHost: String?
        /// The management port (`TOKENRELAY_MANAGEMENT_LISTEN`); nil with ``managementHost``.
        public var managementPort: Int?
        /// Seconds between the service's own readiness checks, which set `tokenrelay_ready` when
        /// nothing probes `/readyz` (`TOKENRELAY_READINESS_CHECK_INTERVAL_S`). Default 10.
        public var readinessCheckIntervalSeconds: Int = 10
        /// Seconds between counts of accounts by state and failure class for the
        /// `tokenrelay_accounts` gauge (`TOKENRELAY_ACCOUNT_HEALTH_INTERVAL_S`; behaviour §3.8).
        /// Default 60.
        public var accountHealthIntervalSeconds: Int = 60

        public init() {}

        /// `host:port` as configured.
        public var listen: String { "\(listenHost):\(listenPort)" }
    }

    /// PostgreSQL: the pool, the LISTEN connection, migrations.
    public struct Database: Sendable {
        /// libpq URL of the database (`TOKENRELAY_DATABASE_URL`). Required by `serve` and `migrate`.
        public var url: String = ""
        /// Connections in the pool (`TOKENRELAY_DATABASE_POOL_SIZE`). Default 8.
        public var poolSize: Int = 8
        /// libpq URL of a direct connection for LISTEN (cross-replica invalidation; not through
        /// pgbouncer in transaction mode; `TOKENRELAY_DATABASE_LISTEN_URL`). Default: ``url``.
        public var listenURL: String?
        /// Apply pending migrations at start-up (`TOKENRELAY_MIGRATE_ON_START`). Default false.
        public var migrateOnStart: Bool = false
        /// Directory of `NNNN_*.sql` migrations (`TOKENRELAY_MIGRATIONS_DIR`). Default: found next
        /// to the binary or in the working directory.
        public var migrationsDirectory: String?

        public init() {}
    }

    /// The app registration and the authorities it signs in at.
    public struct Identity: Sendable {
        /// The app registration's client id (`TOKENRELAY_CLIENT_ID`). Required.
        public var clientId: String = ""
        /// Default authority URL, e.g. `https://login.microsoftonline.com/{tenant}`
        /// (`TOKENRELAY_AUTHORITY`). Required.
        public var authority: String = ""
        /// Authority hosts or URLs trusted without instance discovery (B2C, custom, emulator;
        /// `TOKENRELAY_KNOWN_AUTHORITIES`). Default none.
        public var knownAuthorities: [String] = []
        /// Accept `http://127.0.0.1` / `localhost` authorities, downstream APIs and webhooks
        /// (`TOKENRELAY_ALLOW_HTTP_LOOPBACK`). Default false.
        public var allowHTTPLoopback: Bool = false
        /// The registered redirect URI that reaches `/v1/sign-ins/callback`
        /// (`TOKENRELAY_REDIRECT_URI`). Default `http://{listen}/v1/sign-ins/callback`.
        public var redirectURI: String?
        /// Origins allowed for `redirect_after`, no open redirect (`TOKENRELAY_REDIRECT_AFTER_ORIGINS`).
        /// Default none.
        public var redirectAfterOrigins: [String] = []
        /// Client capabilities sent as `xms_cc` claims, e.g. `cp1` (`TOKENRELAY_CLIENT_CAPABILITIES`).
        /// Default none.
        public var clientCapabilities: [String] = []

        public init() {}
    }

    /// The confidential client credential: at most one of ``secret``, ``certificate`` and
    /// ``assertionFile``, or a ``list`` tried in order. Re-read on SIGHUP.
    public struct Credential: Sendable {
        /// One credential of ``list``: exactly one of ``secret``, ``certificate``, ``assertionFile``.
        public struct Entry: Sendable, Equatable {
            /// A client secret (`secret`, or `secret_file` naming a file that holds it). Never logged.
            public var secret: String?
            /// A PEM file with the unencrypted private key and the certificate (`certificate`).
            public var certificate: String?
            /// A file holding a federated client assertion (`assertion_file`).
            public var assertionFile: String?
            /// When the secret expires (`secret_expires_at`, RFC 3339); readiness warns within 14 days.
            public var secretExpiresAt: Date?

            public init(secret: String? = nil, certificate: String? = nil, assertionFile: String? = nil, secretExpiresAt: Date? = nil) {
                self.secret = secret
                self.certificate = certificate
                self.assertionFile = assertionFile
                self.secretExpiresAt = secretExpiresAt
            }
        }

        /// Credentials tried in order on a rejected client credential (`TOKENRELAY_CLIENT_CREDENTIALS`,
        /// a JSON array; Microsoft.Identity.Web's `ClientCredentials`). Empty: the single settings
        /// below. Default empty.
        public var list: [Entry] = []
        /// Seconds a credential that served after an earlier one was rejected stays the one tried
        /// first (`TOKENRELAY_CLIENT_CREDENTIAL_FALLBACK_S`, default 3,600); then the first is tried again.
        public var fallbackHoldSeconds = 3600
        /// The client secret (`TOKENRELAY_CLIENT_SECRET`). Never logged. Default none.
        public var secret: String?
        /// A PEM file with the unencrypted private key and the certificate
        /// (`TOKENRELAY_CLIENT_CERTIFICATE`; `_FILE` gives the PEM itself). Default none.
        public var certificate: String?
        /// JWS algorithm of certificate assertions (`TOKENRELAY_CLIENT_ASSERTION_ALGORITHM`):
        /// `PS256` (header `x5t#S256`) or `RS256` (header `x5t`, older tenants). Default `PS256`.
        public var assertionAlgorithm: String = "PS256"
        /// A file holding a federated client assertion (e.g. a Kubernetes projected
        /// service-account token), read for every token request (`TOKENRELAY_CLIENT_ASSERTION_FILE`).
        /// Default none.
        public var assertionFile: String?
        /// When the client secret expires (`TOKENRELAY_CLIENT_SECRET_EXPIRES_AT`, RFC 3339):
        /// readiness warns within 14 days of it (behaviour §12 Health). The service cannot learn it
        /// otherwise. Default none.
        public var secretExpiresAt: Date?

        public init() {}
    }

    /// Tokens at rest.
    public struct Encryption: Sendable {
        /// Key ring `id1:base64key,id2:base64key`; the first key encrypts, all decrypt
        /// (`TOKENRELAY_ENCRYPTION_KEYS`). Required; re-read on SIGHUP.
        public var keys: String = ""
        /// Tenants' data keys held unwrapped in memory at most (`TOKENRELAY_DATA_KEY_CAPACITY`,
        /// default 10,000); the least recently loaded goes first.
        public var dataKeyCapacity = 10_000
        /// Seconds an unwrapped data key stays in memory (`TOKENRELAY_DATA_KEY_HOLD_S`, default
        /// 3,600): the HSM is asked once per tenant and period.
        public var dataKeyHoldSeconds = 3600
        /// PKCS#11 key-encryption key (ADR 0016, 0017); nil keeps the key ring as the KEK.
        public var pkcs11: PKCS11?

        public init() {}

        /// The HSM that holds the key-encryption key.
        public struct PKCS11: Sendable {
            /// Path of the PKCS#11 module (`TOKENRELAY_PKCS11_MODULE`), e.g. Debian's
            /// `/usr/lib/softhsm/libsofthsm2.so`.
            public var module: String
            /// Label of the token (`TOKENRELAY_PKCS11_TOKEN_LABEL`).
            public var tokenLabel: String
            /// User PIN (`TOKENRELAY_PKCS11_PIN`, or `_FILE`). Never logged.
            public var pin: String
            /// Labels of the AES keys on the token, `new,old` (`TOKENRELAY_PKCS11_KEY_LABEL`): the
            /// first wraps new data keys, every one unwraps.
            public var keyLabels: [String]

            public init(module: String, tokenLabel: String, pin: String, keyLabels: [String]) {
                self.module = module
                self.tokenLabel = tokenLabel
                self.pin = pin
                self.keyLabels = keyLabels
            }
        }
    }

    /// API keys accepted besides the stored ones.
    public struct APIKeys: Sendable {
        /// An admin API key accepted as it is, for development and first set-up
        /// (`TOKENRELAY_BOOTSTRAP_API_KEY`). Never logged. Default none.
        public var bootstrapKey: String?

        public init() {}
    }

    /// Token acquisition: expiry, refresh, retries, memories.
    public struct Tokens: Sendable {
        /// A token this close to `expires_on` is not served, seconds (`TOKENRELAY_EXPIRY_SKEW_S`).
        /// Default 300.
        public var expirySkewSeconds: Int = 300
        /// How long an interaction-required answer is replayed, seconds
        /// (`TOKENRELAY_UI_REQUIRED_TTL_S`). Default 60.
        public var uiRequiredTTLSeconds: Int = 60
        /// Serve tokens up to `ext_expires_on` while the STS is down
        /// (`TOKENRELAY_ALLOW_EXTENDED_LIFETIME`). Default false.
        public var allowExtendedLifetime: Bool = false
        /// Redemptions of refresh tokens in flight per replica (`TOKENRELAY_MAX_CONCURRENT_REFRESHES`);
        /// more wait within their deadline, then 503 `upstream_unavailable`. Independent of the
        /// database pool: no connection is held while the STS answers (ADR 0012). Default 256.
        public var maxConcurrentRefreshes: Int = 256
        /// How long one redemption lease holds unless renewed, seconds (`TOKENRELAY_REFRESH_LEASE_S`):
        /// the holder renews it every third of this while its token-endpoint call runs, so another
        /// replica takes over a holder that died within this, and a live holder keeps it however
        /// long the call takes. Default 5.
        public var refreshLeaseSeconds: Int = 5
        /// Attempts per STS or downstream call, the first included (`TOKENRELAY_MAX_ATTEMPTS`). Default 3.
        public var maxAttempts: Int = 3
        /// Longest Retry-After waited for inside a request, seconds (`TOKENRELAY_MAX_RETRY_AFTER_S`).
        /// Default 60.
        public var maxRetryAfterSeconds: Int = 60
        /// Seconds a replica trusts what it remembers (accounts, API keys) when no invalidation
        /// notification arrives (behaviour §12; `TOKENRELAY_CACHE_TTL_S`). Default 30.
        public var cacheTTLSeconds: Int = 30
        /// Most memory for this replica's access tokens and accounts, MiB
        /// (`TOKENRELAY_MEMORY_CACHE_MB`, behaviour §10.4): three quarters for access tokens (with
        /// their prebuilt answers), one quarter for accounts, each counted by what its entries
        /// really hold, least recently used out first. Default 64.
        public var memoryCacheMegabytes: Int = 64
        /// Seconds between batched writes of token issuance counts (behaviour §12 Audit;
        /// `TOKENRELAY_ISSUANCE_FLUSH_INTERVAL_S`). Default 10.
        public var issuanceFlushIntervalSeconds: Int = 10

        public init() {}
    }

    /// Bounds per request and per caller.
    public struct Limits: Sendable {
        /// Default request deadline in seconds (behaviour §5; `TOKENRELAY_REQUEST_TIMEOUT_S`). Default 30.
        public var requestTimeoutSeconds: Double = 30
        /// Request body limit in bytes (`TOKENRELAY_MAX_BODY_BYTES`). Default 65536.
        public var maxBodyBytes: Int = 65536
        /// Concurrent client connections (`TOKENRELAY_MAX_CONNECTIONS`). Default 4096.
        public var maxConnections: Int = 4096
        /// Requests per second per API key in each replica (a token bucket per key, per replica;
        /// `TOKENRELAY_RATE_LIMIT_PER_KEY`); 0 = no limit. Default 0.
        public var rateLimitPerKey: Double = 0

        public init() {}
    }

    /// Refresh-token keep-alive (behaviour §11).
    public struct KeepAlive: Sendable {
        /// Refresh accounts whose refresh token was last redeemed this many days ago, so it does
        /// not die of inactivity (AADSTS700082 at 90 days; `TOKENRELAY_KEEPALIVE_AFTER_DAYS`);
        /// 0 turns keep-alive off. Default 60.
        public var afterDays: Int = 60
        /// Keep-alive redemptions per minute at most, a bound toward the STS
        /// (`TOKENRELAY_KEEPALIVE_MAX_PER_MINUTE`). Default 30.
        public var maxPerMinute: Int = 30
        /// Seconds between keep-alive passes in `serve`, each jittered ±20 %
        /// (`TOKENRELAY_KEEPALIVE_INTERVAL_S`). Default 3600.
        public var intervalSeconds: Int = 3600

        public init() {}
    }

    /// Account-event webhooks (behaviour §12 Webhooks and events).
    public struct Webhooks: Sendable {
        /// Where account events are POSTed (`TOKENRELAY_WEBHOOK_URL`). Default none: no delivery.
        public var url: String?
        /// HMAC-SHA256 key of the `TokenRelay-Signature` header (`TOKENRELAY_WEBHOOK_SECRET`);
        /// required with ``url``. Never logged.
        public var secret: String?
        /// Longest wait between delivery attempts while the receiver is down, seconds
        /// (`TOKENRELAY_WEBHOOK_MAX_BACKOFF_S`). Default 300.
        public var maxBackoffSeconds: Int = 300
        /// Days an account event is kept after it occurred (`TOKENRELAY_EVENTS_RETENTION_DAYS`,
        /// behaviour §11); older ones are deleted by the keep-alive job's pass, except, while ``url`` is
        /// set, those the receiver has not acknowledged yet. Default 30, 1–3650.
        public var eventsRetentionDays: Int = 30
        /// Days audit rows, token provenance and token receipts are kept
        /// (`TOKENRELAY_AUDIT_RETENTION_DAYS`, behaviour §12 Audit); older ones are deleted by the
        /// keep-alive job's pass. 0 keeps them for ever. Default 365, 0–3650.
        public var auditRetentionDays: Int = 365

        public init() {}
    }

    /// Downstream APIs (behaviour §6).
    public struct Downstream: Sendable {
        /// APIs by name (`TOKENRELAY_DOWNSTREAM_APIS`). Default: `graph` at
        /// `https://graph.microsoft.com/v1.0`, scopes `User.Read`.
        public var apis: [String: DownstreamAPI] = [
            "graph": DownstreamAPI(baseURL: "https://graph.microsoft.com/v1.0", scopes: ["User.Read"], appScopes: nil)
        ]

        public init() {}
    }

    /// OpenTelemetry traces exported over OTLP/HTTP with JSON encoding (behaviour §8.11).
    public struct Tracing: Sendable {
        /// The receiver's base URL (`TOKENRELAY_OTLP_ENDPOINT`, e.g. `http://collector:4318`);
        /// spans are POSTed to its `/v1/traces`. Default none: no span is recorded (the caller's
        /// `traceparent` still gets a child span id towards the token endpoint and downstream APIs).
        public var endpoint: String?
        /// The `service.name` resource attribute (`TOKENRELAY_OTLP_SERVICE_NAME`). Default `token-relay`.
        public var serviceName: String = "token-relay"
        /// Spans waiting for export at most; more are dropped and counted
        /// (`TOKENRELAY_OTLP_QUEUE_SPANS`). Default 2048, 16–1,000,000.
        public var queueSpans: Int = 2048
        /// Milliseconds between exports (`TOKENRELAY_OTLP_INTERVAL_MS`); a full batch of 512 goes
        /// at once. Default 5000, 100–60,000.
        public var intervalMilliseconds: Int = 5000

        public init() {}
    }

    /// Log level and personal data.
    public struct Logging: Sendable {
        /// `debug|info|warn|error` (`TOKENRELAY_LOG_LEVEL`). Default `info`.
        public var level: LogLevel = .info
        /// Whether usernames may appear in logs (`TOKENRELAY_LOG_PII`). Default false.
        public var pii: Bool = false

        public init() {}
    }
}

/// A configured downstream API (behaviour §6).
public struct DownstreamAPI: Sendable, Equatable {
    /// Base URL without a trailing slash, e.g. `https://graph.microsoft.com/v1.0`.
    public var baseURL: String
    /// Delegated scopes requested for calls made for a user.
    public var scopes: [String]
    /// Application scopes; default `{origin}/.default`.
    public var appScopes: [String]?

    package init(baseURL: String, scopes: [String], appScopes: [String]? = nil) {
        self.baseURL = baseURL
        self.scopes = scopes
        self.appScopes = appScopes
    }
}

public enum LogLevel: String, Sendable, Comparable, CaseIterable {
    case debug, info, warn, error

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// A setting that cannot be used; start-up stops with this one line (behaviour §8).
public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    public let setting: String
    public let reason: String
    public init(setting: String, reason: String) {
        self.setting = setting
        self.reason = reason
    }

    public var description: String { "invalid configuration: \(setting): \(reason)" }
}
