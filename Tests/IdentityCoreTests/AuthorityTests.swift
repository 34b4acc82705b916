import Testing

@testable import IdentityCore

@Suite("Authority validation and canonical form (behaviour §1)")
struct AuthorityTests {
    let open = try! AuthorityValidator(knownAuthorities: [], allowHTTPLoopback: false)

    @Test(
        "well-known AAD hosts are accepted with any tenant",
        arguments: [
            ("https://login.microsoftonline.com/common", "common", true),
            ("https://LOGIN.MicrosoftOnline.com/organizations/", "organizations", true),
            ("https://login.microsoftonline.com/consumers", "consumers", true),
            ("https://login.windows.net/contoso.onmicrosoft.com", "contoso.onmicrosoft.com", false),
            ("https://login.microsoftonline.us/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", false),
            ("https://login.partner.microsoftonline.cn/contoso.partner.onmschina.cn", "contoso.partner.onmschina.cn", false),
        ])
    func wellKnown(url: String, tenant: String, multi: Bool) throws {
        let authority = try open.validate(url)
        #expect(authority.type == .aad)
        #expect(authority.tenant == tenant)
        #expect(authority.isMultiTenant == multi)
        #expect(authority.scheme == "https")
        #expect(authority.port == 443)
        #expect(!authority.url.hasSuffix("/"))
        #expect(authority.url == authority.url.lowercased() || authority.tenant != authority.tenant.lowercased())
    }

    @Test(
        "a tenant or policy segment is unreserved text starting with a letter or digit (new-user attack: these reached the token and authorize URLs)",
        arguments: [
            "https://login.microsoftonline.com/..", "https://login.microsoftonline.com/.", "https://login.microsoftonline.com/t\r\nX-Evil: y",
            "https://login.microsoftonline.com/_control", "https://login.microsoftonline.com/-x", "https://login.microsoftonline.com/%2e%2e",
            "https://login.microsoftonline.com/ténant", "https://login.microsoftonline.com/a b", "https://login.microsoftonline.com/a\u{0}b",
            "https://login.microsoftonline.com/a;b", "https://contoso.b2clogin.com/contoso.onmicrosoft.com/B2C_1_susi\u{85}",
        ])
    func badSegments(url: String) {
        let b2c = try! AuthorityValidator(knownAuthorities: ["https://contoso.b2clogin.com"], allowHTTPLoopback: false)
        #expect(throws: AuthorityError.self, "\(url.debugDescription)") { try b2c.validate(url) }
    }

    @Test("an authority validated again gives the same answer, past the memo's capacity too; each validator has its own; the memo stays bounded")
    func validatedAgain() throws {
        let b2c = try AuthorityValidator(knownAuthorities: ["https://contoso.b2clogin.com"], allowHTTPLoopback: false)
        let url = "https://contoso.b2clogin.com/contoso.onmicrosoft.com/B2C_1_susi"
        let first = try b2c.validate(url)
        #expect(try b2c.validate(url) === first)
        #expect(throws: AuthorityError.self) { try open.validate(url) }  // not known to the other validator
        for _ in 0..<2 { #expect(throws: AuthorityError.self) { try b2c.validate("https://fabrikam.b2clogin.com/t/B2C_1_susi") } }
        let memo = try AuthorityValidator(knownAuthorities: [], allowHTTPLoopback: false)
        for index in 0...AcceptedAuthorities.capacity {
            let tenant = "tenant\(index).onmicrosoft.com"
            #expect(try memo.validate("https://login.microsoftonline.com/\(tenant)").tenant == tenant)
            #expect(memo.accepted.count <= AcceptedAuthorities.capacity)
        }
        #expect(try memo.validate("https://login.microsoftonline.com/tenant0.onmicrosoft.com").tenant == "tenant0.onmicrosoft.com")
        // A text longer than any authority is validated and not remembered.
        let long = "https://login.microsoftonline.com/" + String(repeating: "a", count: AcceptedAuthorities.longestText) + ".onmicrosoft.com"
        let before = memo.accepted.count
        _ = try? memo.validate(long)
        #expect(memo.accepted.count == before)
        let again = try b2c.validate(url)
        #expect(again.tenant == "contoso.onmicrosoft.com" && again.policy == "B2C_1_susi" && again.type == .b2c)
    }

    @Test("canonical URL and endpoints")
    func endpoints() throws {
        let authority = try open.validate("https://Login.MicrosoftOnline.com/Contoso.onmicrosoft.com/")
        #expect(authority.url == "https://login.microsoftonline.com/Contoso.onmicrosoft.com")
        #expect(authority.host == "login.microsoftonline.com")
        #expect(authority.tokenEndpoint == "https://login.microsoftonline.com/Contoso.onmicrosoft.com/oauth2/v2.0/token")
        #expect(authority.authorizeEndpoint == "https://login.microsoftonline.com/Contoso.onmicrosoft.com/oauth2/v2.0/authorize")
        #expect(
            authority.discoveryEndpoint
                == "https://login.microsoftonline.com/Contoso.onmicrosoft.com/v2.0/.well-known/openid-configuration")
    }

    @Test(
        "aliases of one cloud are one environment",
        arguments: [
            ("https://login.windows.net/common", "login.microsoftonline.com"),
            ("https://login.microsoft.com/common", "login.microsoftonline.com"),
            ("https://sts.windows.net/common", "login.microsoftonline.com"),
            ("https://login.microsoftonline.com/common", "login.microsoftonline.com"),
            ("https://login.usgovcloudapi.net/common", "login.microsoftonline.us"),
            ("https://login.partner.microsoftonline.cn/common", "login.chinacloudapi.cn"),
            ("https://login.chinacloudapi.cn/common", "login.chinacloudapi.cn"),
        ])
    func environments(url: String, environment: String) throws {
        #expect(try open.validate(url).environment == environment)
    }

    @Test("the v2 suffix people paste is tolerated")
    func v2Suffix() throws {
        #expect(try open.validate("https://login.microsoftonline.com/common/v2.0").url == "https://login.microsoftonline.com/common")
        #expect(
            try open.validate("https://login.microsoftonline.com/common/oauth2/v2.0/token").url
                == "https://login.microsoftonline.com/common")
    }

    @Test(
        "malformed authorities are rejected",
        arguments: [
            "login.microsoftonline.com/common", "ftp://login.microsoftonline.com/common", "https://login.microsoftonline.com",
            "https://login.microsoftonline.com/common/extra", "https://login.microsoftonline.com/common?x=1",
            "https://user@login.microsoftonline.com/common", "https://login.microsoftonline.com:99999/common",
            "http://login.microsoftonline.com/common", "https://login micro.com/common",
        ])
    func malformed(url: String) {
        #expect(throws: AuthorityError.self) { try open.validate(url) }
    }

    @Test("B2C and custom hosts need known_authorities; unknown is invalid_authority without a network call")
    func unknownHosts() throws {
        #expect(throws: AuthorityError.self) { try open.validate("https://contoso.b2clogin.com/contoso.onmicrosoft.com/B2C_1_susi") }
        #expect(throws: AuthorityError.self) { try open.validate("https://contoso.ciamlogin.com/contoso.onmicrosoft.com") }
        #expect(throws: AuthorityError.self) { try open.validate("https://login.contoso.com/tenant") }
        // A well-known host on another port is not well known.
        #expect(throws: AuthorityError.self) { try open.validate("https://login.microsoftonline.com:8443/common") }
    }

    @Test("B2C forms: with tfp, without, custom domain with a policy segment")
    func b2c() throws {
        let validator = try AuthorityValidator(
            knownAuthorities: ["contoso.b2clogin.com", "https://login.contoso.com"], allowHTTPLoopback: false)
        let withTFP = try validator.validate("https://contoso.b2clogin.com/tfp/contoso.onmicrosoft.com/B2C_1_SUSI")
        #expect(withTFP.type == .b2c)
        #expect(withTFP.tenant == "contoso.onmicrosoft.com")
        #expect(withTFP.policy == "B2C_1_SUSI")
        #expect(withTFP.url == "https://contoso.b2clogin.com/contoso.onmicrosoft.com/B2C_1_SUSI")
        #expect(withTFP.tokenEndpoint == "https://contoso.b2clogin.com/contoso.onmicrosoft.com/B2C_1_SUSI/oauth2/v2.0/token")
        let withoutTFP = try validator.validate("https://contoso.b2clogin.com/contoso.onmicrosoft.com/B2C_1_SUSI")
        #expect(withoutTFP == withTFP)
        let custom = try validator.validate("https://login.contoso.com/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee/B2C_1A_signin")
        #expect(custom.type == .b2c)
        #expect(custom.policy == "B2C_1A_signin")
        // A B2C authority needs its policy.
        #expect(throws: AuthorityError.self) { try validator.validate("https://contoso.b2clogin.com/contoso.onmicrosoft.com") }
    }

    @Test("CIAM: tenant from the path, or from the subdomain when there is none")
    func ciam() throws {
        let validator = try AuthorityValidator(knownAuthorities: ["https://contoso.ciamlogin.com"], allowHTTPLoopback: false)
        let explicit = try validator.validate("https://contoso.ciamlogin.com/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")
        #expect(explicit.type == .ciam)
        #expect(explicit.tenant == "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")
        let bare = try validator.validate("https://contoso.ciamlogin.com/")
        #expect(bare.tenant == "contoso.onmicrosoft.com")
        #expect(bare.url == "https://contoso.ciamlogin.com/contoso.onmicrosoft.com")
    }

    @Test("known entry: scheme, host and port must match; the path is a whole-segment prefix")
    func knownEntryRules() throws {
        let validator = try AuthorityValidator(
            knownAuthorities: ["https://login.contoso.com:8443/tenant-a"], allowHTTPLoopback: false)
        #expect(try validator.validate("https://login.contoso.com:8443/tenant-a").tenant == "tenant-a")
        #expect(try validator.validate("https://LOGIN.contoso.com:8443/Tenant-A").tenant == "Tenant-A")
        #expect(throws: AuthorityError.self) { try validator.validate("https://login.contoso.com:8443/tenant-ab") }
        #expect(throws: AuthorityError.self) { try validator.validate("https://login.contoso.com/tenant-a") }
        #expect(throws: AuthorityError.self) { try validator.validate("https://login.contoso.com:8444/tenant-a") }
        #expect(throws: AuthorityError.self) { try validator.validate("https://other.contoso.com:8443/tenant-a") }
        // A port that is not the default is part of the environment.
        #expect(try validator.validate("https://login.contoso.com:8443/tenant-a").environment == "login.contoso.com:8443")
        #expect(try validator.validate("https://login.contoso.com:8443/tenant-a").url == "https://login.contoso.com:8443/tenant-a")
    }

    @Test("a bare host means https on 443 with any path")
    func bareHost() throws {
        let validator = try AuthorityValidator(knownAuthorities: ["login.contoso.com"], allowHTTPLoopback: false)
        #expect(try validator.validate("https://login.contoso.com/anything").tenant == "anything")
        #expect(throws: AuthorityError.self) { try validator.validate("https://login.contoso.com:8443/anything") }
    }

    @Test("http only for known loopback authorities when allowed")
    func httpLoopback() throws {
        let allowed = try AuthorityValidator(
            knownAuthorities: ["http://127.0.0.1:8081", "http://[::1]:9000/t", "http://localhost:7000"], allowHTTPLoopback: true)
        let authority = try allowed.validate("http://127.0.0.1:8081/common")
        #expect(authority.scheme == "http")
        #expect(authority.url == "http://127.0.0.1:8081/common")
        #expect(authority.environment == "127.0.0.1:8081")
        #expect(authority.tokenEndpoint == "http://127.0.0.1:8081/common/oauth2/v2.0/token")
        #expect(try allowed.validate("http://[::1]:9000/t").host == "[::1]")
        #expect(try allowed.validate("http://LOCALHOST:7000/x").host == "localhost")
        // Loopback but not known.
        #expect(throws: AuthorityError.self) { try allowed.validate("http://127.0.0.1:8082/common") }
        // Known but http is not allowed.
        let strict = try AuthorityValidator(knownAuthorities: ["http://127.0.0.1:8081"], allowHTTPLoopback: false)
        #expect(throws: AuthorityError.self) { try strict.validate("http://127.0.0.1:8081/common") }
        // http for a non-loopback host never.
        let wide = try AuthorityValidator(knownAuthorities: ["http://sts.example.com"], allowHTTPLoopback: true)
        #expect(throws: AuthorityError.self) { try wide.validate("http://sts.example.com/common") }
    }

    @Test("the default authority counts as known: loopback emulator and B2C defaults")
    func defaultAuthority() throws {
        let emulator = try AuthorityValidator(
            knownAuthorities: [], allowHTTPLoopback: true, defaultAuthority: "http://127.0.0.1:8081/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")
        #expect(try emulator.validate("http://127.0.0.1:8081/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee").port == 8081)
        #expect(throws: AuthorityError.self) { try emulator.validate("http://127.0.0.1:8081/other-tenant") }
        #expect(throws: AuthorityError.self) {
            try AuthorityValidator(knownAuthorities: [], allowHTTPLoopback: false, defaultAuthority: "http://127.0.0.1:8081/t")
                .validate("http://127.0.0.1:8081/t")
        }
        let b2c = try AuthorityValidator(
            knownAuthorities: [], allowHTTPLoopback: false,
            defaultAuthority: "https://contoso.b2clogin.com/tfp/contoso.onmicrosoft.com/B2C_1_susi")
        #expect(try b2c.validate("https://contoso.b2clogin.com/tfp/contoso.onmicrosoft.com/B2C_1_susi").type == .b2c)
        #expect(try b2c.validate("https://contoso.b2clogin.com/contoso.onmicrosoft.com/b2c_1_SUSI").type == .b2c)
        let known = try AuthorityValidator(
            knownAuthorities: ["https://contoso.b2clogin.com/contoso.onmicrosoft.com"], allowHTTPLoopback: false)
        #expect(try known.validate("https://contoso.b2clogin.com/tfp/contoso.onmicrosoft.com/B2C_1_any").policy == "B2C_1_any")
        #expect(throws: AuthorityError.self) { try b2c.validate("https://contoso.b2clogin.com/contoso.onmicrosoft.com/B2C_1_other") }
        #expect(throws: AuthorityError.self) {
            try AuthorityValidator(knownAuthorities: [], allowHTTPLoopback: false, defaultAuthority: "login.contoso.com")
        }
    }

    @Test("a known_authorities entry that is not a URL is rejected at start-up")
    func badEntry() {
        #expect(throws: AuthorityError.self) { try AuthorityValidator(knownAuthorities: ["ftp://x"], allowHTTPLoopback: false) }
        #expect(throws: AuthorityError.self) {
            try AuthorityValidator(knownAuthorities: ["login.contoso.com/tenant"], allowHTTPLoopback: false)
        }
    }
}
