import Foundation
import IdentityCore
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore
import TokenRelayUpstream

@Suite("API key limits: scope globs, tenants, rate buckets, the permission table")
struct APIKeyLimitsTests {
    static func account(realm: String) -> AccountRecord {
        AccountRecord(
            accountId: "acc_1", clientId: "c", environment: "login.microsoftonline.com", homeAccountId: "u.\(realm)", realm: realm, localAccountId: "u",
            username: "alice@contoso.example", name: "Alice", authority: "https://login.microsoftonline.com/\(realm)", authorityType: .aad, state: .active,
            idTokenClaims: "{}", createdAt: "2026-11-29T00:00:00Z", lastUsedAt: nil)
    }

    @Test(
        "Scope globs are case-insensitive; * spans anything, ? one character",
        arguments: [
            ("User.*", "user.read", true), ("User.*", "Mail.Read", false), ("*", "anything/at/all", true), ("Us?r.Read", "User.Read", true),
            ("https://vault.azure.net/*", "https://VAULT.azure.net/user_impersonation", true), ("https://vault.azure.net/*", "https://vault.azure.net", false),
            ("*.Read", "Mail.ReadWrite", false), ("*.Read*", "Mail.ReadWrite", true), ("", "", true), ("a*b*c", "aXbYbZc", true),
        ])
    func globs(pattern: String, text: String, matches: Bool) {
        #expect(KeyAccess.glob(pattern.lowercased(), matches: text.lowercased()) == matches)
    }

    @Test("A scope matches in its short or full Graph form; every requested scope must match")
    func scopeForms() {
        let access = KeyAccess(scopePatterns: ["https://graph.microsoft.com/User.*", "https://vault.azure.net/*"])
        #expect(access.allows(ScopeSet(normalizing: ["User.Read"])))
        #expect(access.allows(ScopeSet(normalizing: ["https://vault.azure.net/user_impersonation"])))
        #expect(!access.allows(ScopeSet(normalizing: ["User.Read", "Mail.Read"])))
        #expect(throws: RelayError.self) { try access.check(ScopeSet(normalizing: ["Mail.Read"]), field: "scopes") }
        #expect(KeyAccess.unrestricted.allows(ScopeSet(normalizing: ["Mail.Read"])))
    }

    @Test("Tenants compare case-insensitively; an unlimited key sees every account")
    func tenants() {
        let access = KeyAccess(tenants: ["11111111-1111-1111-1111-11111111AAAA"])
        #expect(access.sees(Self.account(realm: "11111111-1111-1111-1111-11111111aaaa")))
        #expect(!access.sees(Self.account(realm: "22222222-2222-2222-2222-222222222222")))
        #expect(access.allows(tenant: "11111111-1111-1111-1111-11111111aaaa"))
        #expect(!access.allows(tenant: "common"))
        #expect(KeyAccess.unrestricted.sees(Self.account(realm: "anything")))
    }

    @Test("A token bucket allows a burst of one second's worth, then refills at the rate")
    func bucket() throws {
        let bucket = RateBucket(rate: 2, now: 100)
        #expect(bucket.take(now: 100) == nil)
        #expect(bucket.take(now: 100) == nil)
        let wait = try #require(bucket.take(now: 100))
        #expect(abs(wait - 0.5) < 1e-9)
        #expect(bucket.take(now: 100.5) == nil)
        #expect(bucket.take(now: 100.5) != nil)
        bucket.giveBack()
        #expect(bucket.take(now: 100.5) == nil)
        // Idle time never fills past the capacity.
        #expect(bucket.take(now: 1000) == nil)
        #expect(bucket.take(now: 1000) == nil)
        #expect(bucket.take(now: 1000) != nil)
        let problem = RateBucket.rateLimited(wait: 0.2)
        #expect(problem.code == .rateLimited)
        #expect(problem.headers["Retry-After"] == "1")
        #expect(problem.extensions["retry_after_s"] == .number(1))
    }

    @Test("Every registered route declares the access of behaviour §12's permission table")
    func permissionTable() throws {
        let configuration = Configuration.offline()
        let service = try TokenRelayService(configuration: configuration, logger: Logger(level: .error, logPII: false, sink: .memory()))
        defer { service.stop() }
        #expect(!service.routeAccess.isEmpty)
        for route in service.routeAccess {
            #expect(route.access == RoutePermissions.access(method: route.method, template: route.template), "\(route.method) \(route.template)")
        }
        #expect(RoutePermissions.access(method: "POST", template: "/v1/tokens/app") == .requires(.tokensAcquire))
        #expect(RoutePermissions.access(method: "POST", template: "/v1/tokens/on-behalf-of") == .requires(.tokensAcquire))
        #expect(RoutePermissions.access(method: "GET", template: "/v1/events") == .requires(.accountsRead))
        #expect(RoutePermissions.access(method: "POST", template: "/v1/accounts/import") == .requires(.accountsWrite))
        #expect(RoutePermissions.access(method: "GET", template: "/v1/sign-ins/start") == .open)
        #expect(RoutePermissions.access(method: "POST", template: "/v1/downstream/{api}/{path...}") == .requires(.downstreamCall))
        #expect(RoutePermissions.access(method: "GET", template: "/v1/unclassified") == .requires(.admin))
    }

    @Test("TOKENRELAY_RATE_LIMIT_PER_KEY and TOKENRELAY_CLIENT_TIMEOUT_S are read and checked")
    func settings() throws {
        let base = ["TOKENRELAY_DATABASE_URL": "postgresql://x"]
        let loaded = try ConfigurationLoader(environment: base.merging(["TOKENRELAY_RATE_LIMIT_PER_KEY": "2.5", "TOKENRELAY_CLIENT_TIMEOUT_S": "7"]) { $1 })
            .load(requireIdentity: false)
        #expect(loaded.limits.rateLimitPerKey == 2.5)
        #expect(loaded.http.clientTimeoutSeconds == 7)
        #expect(try ConfigurationLoader(environment: base).load(requireIdentity: false).limits.rateLimitPerKey == 0)
        for (name, value) in [("TOKENRELAY_RATE_LIMIT_PER_KEY", "-1"), ("TOKENRELAY_RATE_LIMIT_PER_KEY", "fast"), ("TOKENRELAY_CLIENT_TIMEOUT_S", "0")] {
            #expect(throws: ConfigurationError.self) { try ConfigurationLoader(environment: base.merging([name: value]) { $1 }).load(requireIdentity: false) }
        }
    }

    @Test("Array literals quote items so patterns with commas or quotes survive")
    func arrayLiteral() {
        #expect(APIKeyStore.arrayLiteral([]) == "{}")
        #expect(APIKeyStore.arrayLiteral(["a,b", #"c"d"#, #"e\f"#]) == #"{"a,b","c\"d","e\\f"}"#)
    }
}
