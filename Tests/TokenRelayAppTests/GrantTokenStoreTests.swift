import Foundation
import HTTPClientBridge
import IdentityCore
import PostgresBridge
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore
import TokenRelayTesting
import TokenRelayUpstream

/// The app and OBO token rows on real PostgreSQL: sealed per owner, shared between replicas
/// (a replica with an empty memory serves another's token without the STS), purged after the
/// assertion's expiry.
@Suite("Grant token store", .serialized)
struct GrantTokenStoreTests {
    static let clientId = "6731de76-14a6-49ae-97bc-6eba6914391e"
    static let environment = "login.microsoftonline.com"

    static func withStore(_ name: String, _ body: (TokenStore, PostgresPool) async throws -> Void) async throws {
        let url = try await TestPostgres.freshDatabase(named: name)
        let pool = PostgresPool(url: url, size: 2)
        defer { pool.close() }
        _ = try await Migrator(directory: BuiltProducts.packageRoot() + "/migrations").apply(on: pool)
        let ring = try KeyRing(parsing: KeyRing.generateEntry(id: "k1"))
        try await body(TokenStore(database: Database(pool: pool), clientId: clientId, cipher: TokenCipher(ring: ring)), pool)
    }

    static func token(owner: String, secret: String, expiresOn: Int, scopes: [String] = ["https://graph.microsoft.com/.default"]) -> StoredAccessToken {
        StoredAccessToken(
            accountId: owner, environment: environment, realm: "t1", clientId: clientId, scopes: scopes, secret: secret, expiresOn: expiresOn,
            extExpiresOn: nil, refreshOn: nil)
    }

    @Test("Rows open only for their owner; OBO rows are purged after the assertion expires")
    func sealedPerOwnerAndPurged() async throws {
        try await Self.withStore("grant_store") { store, pool in
            let now = Int(Date().timeIntervalSince1970)
            try await store.saveGrantAccessToken(Self.token(owner: "app:t1", secret: "app-token", expiresOn: now + 3600), ownerExpiresOn: nil)
            try await store.saveGrantAccessToken(Self.token(owner: "obo:old", secret: "old-token", expiresOn: now + 3600), ownerExpiresOn: now - 1)
            try await store.saveGrantAccessToken(Self.token(owner: "obo:new", secret: "new-token", expiresOn: now + 3600), ownerExpiresOn: now + 600)
            try await store.saveOBORefreshToken(owner: "obo:old", environment: Self.environment, realm: "t1", token: "rt-old", ownerExpiresOn: now - 1)
            try await store.saveOBORefreshToken(owner: "obo:new", environment: Self.environment, realm: "t1", token: "rt-new", ownerExpiresOn: now + 600)

            #expect(try await store.grantAccessTokens(owner: "app:t1", environment: Self.environment, realm: "t1").map(\.secret) == ["app-token"])
            #expect(try await store.oboRefreshToken(owner: "obo:new", environment: Self.environment) == "rt-new")
            // A row moved to another owner no longer opens (additional data binds the owner).
            _ = try await pool.withConnection { try $0.query("UPDATE grant_access_tokens SET owner = 'app:t2' WHERE owner = 'app:t1'") }
            #expect(try await store.grantAccessTokens(owner: "app:t2", environment: Self.environment, realm: "t1").isEmpty)
            let dump = try await pool.withConnection { connection in
                try connection.query("SELECT ciphertext FROM grant_access_tokens UNION ALL SELECT ciphertext FROM obo_refresh_tokens").rows
                    .map { String(decoding: $0.bytes("ciphertext") ?? [], as: UTF8.self) }.joined()
            }
            #expect(!dump.contains("token") && !dump.contains("rt-"))

            #expect(try await store.purgeExpiredOnBehalfOfTokens(now: now) == 2)
            #expect(try await store.oboRefreshToken(owner: "obo:old", environment: Self.environment) == nil)
            #expect(try await store.grantAccessTokens(owner: "obo:new", environment: Self.environment, realm: "t1").count == 1)
            try await store.deleteOBORefreshToken(owner: "obo:new", environment: Self.environment)
            #expect(try await store.oboRefreshToken(owner: "obo:new", environment: Self.environment) == nil)
        }
    }

    @Test("A replica with an empty memory serves the token another replica stored, without the STS")
    func sharedBetweenReplicas() async throws {
        try await Self.withStore("grant_replicas") { store, _ in
            let now = Int(Date().timeIntervalSince1970)
            try await store.saveGrantAccessToken(Self.token(owner: "app:t1", secret: "from-replica-a", expiresOn: now + 3600), ownerExpiresOn: nil)
            let http = HTTPClient()
            defer { http.shutdown() }
            let logger = Logger(level: .error, logPII: false, sink: .memory())
            let metrics = Metrics()
            let authorities = try AuthorityValidator(knownAuthorities: [], allowHTTPLoopback: false)
            let authority = try authorities.validate("https://login.microsoftonline.com/t1")
            // An STS call would fail (the credential is empty and the test has no network): the
            // answer must come from the table.
            let sts = STSClient(
                http: RetryingHTTPClient(http: http, metrics: metrics, logger: logger), clientId: Self.clientId,
                credential: ClientCredential(clientId: Self.clientId, kind: .none), maxAttempts: 1, maxRetryAfterSeconds: 0, metrics: metrics)
            let service = GrantTokenService(
                store: store, sts: sts, authorities: authorities, defaultAuthority: authority, memory: GrantTokenMemory(),
                coalescer: RefreshCoalescer(tasks: BackgroundTasks()),
                clientCapabilities: [], expirySkewSeconds: 300, metrics: metrics, logger: logger, now: { now })
            let context = RequestContext(correlationId: UUID().uuidString, deadline: Date().addingTimeInterval(5), caller: nil, access: .unrestricted)
            let result = try await service.acquireApp(.init(scopes: ScopeSet(normalizing: ["https://graph.microsoft.com/.default"])), context: context)
            #expect(result.source == .cache)
            #expect(result.token.secret == "from-replica-a")
        }
    }
}
