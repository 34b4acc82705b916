/// The kind of identity provider behind an authority (behaviour §1).
public enum AuthorityType: String, Sendable {
    /// Microsoft Entra ID (public and sovereign clouds), personal accounts via `consumers`/`common`.
    case aad
    /// Azure AD B2C user flows / custom policies.
    case b2c
    /// Microsoft Entra External ID (`*.ciamlogin.com`).
    case ciam
}

/// A validated, canonical authority: `https://host[:port]/tenant[/policy]`.
///
/// Build one with `AuthorityValidator.validate(_:)`; it never makes a network call.
/// Source: behaviour §1 "Authority"; Microsoft identity platform "Authority" and
/// "Azure AD B2C: MSAL authority" docs.
///
/// An immutable class, equal by its members: a request's authority is handed through the silent
/// plan, its refresh and its answer, and as a struct of five strings each hand-over copied them
/// one by one (through the runtime's generic tuple copy for `Authority?`, behaviour §10).
public final class Authority: Sendable, Hashable {
    /// Canonical URL: scheme, lower-cased host, port only when not the scheme's default,
    /// tenant, B2C policy; no `tfp` segment, no trailing slash.
    public let url: String
    /// Lower-cased host (IPv6 literals keep their brackets: `[::1]`).
    public let host: String
    /// TCP port (443 for https, 80 for http unless given).
    public let port: Int
    /// `https`, or `http` for an allowed loopback authority.
    public let scheme: String
    /// GUID, domain, `common`, `organizations` or `consumers` (as given).
    public let tenant: String
    /// The B2C policy segment, as given (e.g. `B2C_1_signupsignin`).
    public let policy: String?
    /// Provider kind, from the host and path.
    public let type: AuthorityType

    public init(scheme: String, host: String, port: Int, tenant: String, policy: String?, type: AuthorityType) {
        self.scheme = scheme
        self.host = host.lowercased()
        self.port = port
        self.tenant = tenant
        self.policy = policy
        self.type = type
        var url = "\(scheme)://\(self.host)"
        if port != Authority.defaultPort(scheme) { url += ":\(port)" }
        url += "/\(tenant)"
        if let policy { url += "/\(policy)" }
        self.url = url
    }

    public static func == (lhs: Authority, rhs: Authority) -> Bool {
        lhs === rhs
            || (lhs.url == rhs.url && lhs.host == rhs.host && lhs.port == rhs.port && lhs.scheme == rhs.scheme && lhs.tenant == rhs.tenant
                && lhs.policy == rhs.policy && lhs.type == rhs.type)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(url)
        hasher.combine(host)
        hasher.combine(port)
        hasher.combine(scheme)
        hasher.combine(tenant)
        hasher.combine(policy)
        hasher.combine(type)
    }

    /// Cache partition: the host (`+ ":port"` when not the default), with the aliases of one
    /// cloud folded into one canonical host (behaviour §1: ADAL-era data says login.windows.net).
    public var environment: String {
        let canonical = Authority.environmentAliases[host] ?? host
        return port == Authority.defaultPort(scheme) ? canonical : "\(canonical):\(port)"
    }

    /// `{url}/oauth2/v2.0/token`.
    public var tokenEndpoint: String { url + "/oauth2/v2.0/token" }
    /// `{url}/oauth2/v2.0/authorize`.
    public var authorizeEndpoint: String { url + "/oauth2/v2.0/authorize" }
    /// `{url}/v2.0/.well-known/openid-configuration` (OpenID Connect Discovery 1.0 §4).
    public var discoveryEndpoint: String { url + "/v2.0/.well-known/openid-configuration" }

    /// True for `common`, `organizations` and `consumers`: the id_token issuer then holds
    /// `{tenantid}` and the realm comes from the token's `tid`.
    public var isMultiTenant: Bool { Authority.isMultiTenantName(tenant) }

    static let multiTenantNames: Set<String> = ["common", "organizations", "consumers"]

    /// Whether `text` is `common`, `organizations` or `consumers` (any case): a tenant segment
    /// that names no one tenant.
    public static func isMultiTenantName(_ text: String) -> Bool { multiTenantNames.contains(text.lowercased()) }

    static func defaultPort(_ scheme: String) -> Int { scheme == "http" ? 80 : 443 }

    /// Hosts of each public cloud (instance discovery metadata, "Authority aliases").
    static let environmentAliases: [String: String] = [
        "login.microsoftonline.com": "login.microsoftonline.com",
        "login.windows.net": "login.microsoftonline.com",
        "login.microsoft.com": "login.microsoftonline.com",
        "sts.windows.net": "login.microsoftonline.com",
        "login.microsoftonline.us": "login.microsoftonline.us",
        "login.usgovcloudapi.net": "login.microsoftonline.us",
        "login.chinacloudapi.cn": "login.chinacloudapi.cn",
        "login.partner.microsoftonline.cn": "login.chinacloudapi.cn",
    ]

    /// The well-known AAD hosts accepted with any tenant without `known_authorities`.
    public static var wellKnownHosts: Set<String> { Set(environmentAliases.keys) }
}
