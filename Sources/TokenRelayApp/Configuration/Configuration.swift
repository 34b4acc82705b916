import Foundation

/// TokenRelay's settings (SPEC §11). Every property documents its default and unit; names of the
/// environment variables are part of the contract (`TOKENRELAY_` + the upper-cased JSON name).
public struct Configuration: Sendable {
    /// Where to serve, `host:port`. Default `127.0.0.1:8080`.
    public var listenHost: String = "127.0.0.1"
    public var listenPort: Int = 8080
    /// libpq URL of the database. Required by `serve` and `migrate`.
    public var databaseURL: String = ""
    /// Connections in the pool. Default 8.
    public var databasePoolSize: Int = 8
    /// The app registration's client id. Required.
    public var clientId: String = ""
    /// The confidential client credential (secret). Never logged.
    public var clientSecret: String?
    /// The certificate credential: a PEM file with the unencrypted private key and the
    /// certificate (`TOKENRELAY_CLIENT_CERTIFICATE`; `_FILE` gives the PEM itself). Default none.
    public var clientCertificate: String?
    /// JWS algorithm of certificate assertions: `PS256` (header `x5t#S256`) or `RS256` (header
    /// `x5t`, older tenants). Default `PS256`.
    public var clientAssertionAlgorithm: String = "PS256"
    /// A file holding a federated client assertion (e.g. a Kubernetes projected service-account
    /// token), read for every token request. Default none.
    public var clientAssertionFile: String?
    /// Default authority URL, e.g. `https://login.microsoftonline.com/{tenant}`. Required.
    public var authority: String = ""
    /// Authority hosts or URLs trusted without instance discovery (B2C, custom, emulator).
    public var knownAuthorities: [String] = []
    /// Accept `http://127.0.0.1` / `localhost` authorities and downstream APIs. Default false.
    public var allowHTTPLoopback: Bool = false
    /// The registered redirect URI that reaches `/v1/sign-ins/callback`.
    /// Default `http://{listen}/v1/sign-ins/callback`.
    public var redirectURI: String?
    /// Key ring `id1:base64key,id2:base64key`; the first key encrypts, all decrypt. Required.
    public var encryptionKeys: String = ""
    /// Downstream APIs by name (SPEC §6). Default: `graph` at `https://graph.microsoft.com/v1.0`, scopes `User.Read`.
    public var downstreamAPIs: [String: DownstreamAPI] = [
        "graph": DownstreamAPI(baseURL: "https://graph.microsoft.com/v1.0", scopes: ["User.Read"], appScopes: nil)
    ]
    /// An admin API key accepted as it is (development, first set-up). Never logged.
    public var bootstrapAPIKey: String?
    /// `debug|info|warn|error`. Default `info`.
    public var logLevel: LogLevel = .info
    /// Whether usernames may appear in logs. Default false.
    public var logPII: Bool = false
    /// Default request deadline in seconds (SPEC §5). Default 30.
    public var requestTimeoutSeconds: Double = 30
    /// Attempts per STS or downstream call, the first included. Default 3.
    public var maxAttempts: Int = 3
    /// Longest Retry-After waited for inside a request, seconds. Default 60.
    public var maxRetryAfterSeconds: Int = 60
    /// A token this close to `expires_on` (seconds) is not served. Default 300.
    public var expirySkewSeconds: Int = 300
    /// How long an interaction-required answer is replayed, seconds. Default 60.
    public var uiRequiredTTLSeconds: Int = 60
    /// Redemptions of refresh tokens in flight per replica (`TOKENRELAY_MAX_CONCURRENT_REFRESHES`);
    /// more wait within their deadline, then 503 `upstream_unavailable`. Independent of the
    /// database pool: no connection is held while the STS answers (ADR 0012). Default 256.
    public var maxConcurrentRefreshes: Int = 256
    /// How long one redemption lease holds, seconds (`TOKENRELAY_REFRESH_LEASE_S`): another
    /// replica takes over a holder that died after this. The holder's STS call is cut off at
    /// three quarters of it, so it can never still succeed when the lease passes. Default 60.
    public var refreshLeaseSeconds: Int = 60
    /// Serve tokens up to `ext_expires_on` while the STS is down. Default false.
    public var allowExtendedLifetime: Bool = false
    /// Client capabilities sent as `xms_cc` claims, e.g. `cp1`. Default none.
    public var clientCapabilities: [String] = []
    /// Request body limit in bytes. Default 65536.
    public var maxBodyBytes: Int = 65536
    /// Concurrent client connections. Default 4096.
    public var maxConnections: Int = 4096
    /// Requests per second per API key in each replica (a token bucket per key, per replica); 0 = no limit. Default 0.
    public var rateLimitPerKey: Double = 0
    /// Seconds a client connection may stay silent (while sending its request, or idle between
    /// keep-alive requests), and may take to send a whole request head however it trickles the
    /// bytes, before it is closed. Default 30.
    public var clientTimeoutSeconds: Int = 30
    /// Server threads answering requests. Default: the number of cores.
    public var serverThreads: Int = max(1, ProcessInfo.processInfo.activeProcessorCount)
    /// Apply pending migrations at start-up. Default false.
    public var migrateOnStart: Bool = false
    /// The base URL callers and browsers use (behind a proxy). Default `http://{listen}`.
    public var publicBaseURL: String?
    /// Origins allowed for `redirect_after` (no open redirect). Default none.
    public var redirectAfterOrigins: [String] = []
    /// libpq URL of a direct connection for LISTEN (cross-replica invalidation; not through
    /// pgbouncer in transaction mode). Default: `databaseURL`.
    public var databaseListenURL: String?
    /// Seconds a replica trusts what it remembers (accounts, API keys) when no invalidation
    /// notification arrives (SPEC §12). Default 30.
    public var cacheTTLSeconds: Int = 30
    /// Seconds in-flight requests get to finish after SIGTERM before the server closes them. Default 10.
    public var shutdownTimeoutSeconds: Int = 10
    /// Directory of `NNNN_*.sql` migrations. Default: found next to the binary or in the working directory.
    public var migrationsDirectory: String?
    /// Refresh accounts whose refresh token was last redeemed this many days ago, so it does not
    /// die of inactivity (AADSTS700082 at 90 days); 0 turns keep-alive off. Default 60.
    public var keepAliveAfterDays: Int = 60
    /// Keep-alive redemptions per minute at most (a bound toward the STS). Default 30.
    public var keepAliveMaxPerMinute: Int = 30
    /// Seconds between keep-alive passes in `serve` (each jittered ±20 %). Default 3600.
    public var keepAliveIntervalSeconds: Int = 3600
    /// Where account events are POSTed (SPEC §12 Webhooks and events). Default none.
    public var webhookURL: String?
    /// HMAC-SHA256 key of the `TokenRelay-Signature` header; required with `webhookURL`. Never logged.
    public var webhookSecret: String?
    /// Longest wait between webhook delivery attempts while the receiver is down, seconds. Default 300.
    public var webhookMaxBackoffSeconds: Int = 300
    /// When the client secret expires (`TOKENRELAY_CLIENT_SECRET_EXPIRES_AT`, RFC 3339): readiness
    /// warns within 14 days of it (SPEC §12 Health). The service cannot learn it otherwise.
    public var clientSecretExpiresAt: Date?
    /// Seconds between batched writes of token issuance counts (SPEC §12 Audit). Default 10.
    public var issuanceFlushIntervalSeconds: Int = 10

    public init() {}

    /// `host:port` as configured.
    public var listen: String { "\(listenHost):\(listenPort)" }
}

/// A configured downstream API (SPEC §6).
public struct DownstreamAPI: Sendable, Equatable {
    /// Base URL without a trailing slash, e.g. `https://graph.microsoft.com/v1.0`.
    public var baseURL: String
    /// Delegated scopes requested for calls made for a user.
    public var scopes: [String]
    /// Application scopes; default `{origin}/.default`.
    public var appScopes: [String]?
}

public enum LogLevel: String, Sendable, Comparable, CaseIterable {
    case debug, info, warn, error

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}
