import Foundation
import HTTPCommon

/// An authority resolved against the directory.
struct ResolvedAuthority {
    /// The tenant the path names; nil for `common`, `organizations` and `consumers`.
    var tenant: TestTenant?
    /// The path segment as written.
    var segment: String
    var policy: String?

    var isB2C: Bool { tenant?.isB2C ?? false }

    /// The authority path (`contoso.example`, `tenant/B2C_1_signin`).
    var path: String { policy.map { segment + "/" + $0 } ?? segment }
}

extension IdentityPlatformEmulator {
    static let multiTenantSegments: Set<String> = ["common", "organizations", "consumers"]

    /// The tenant named in a path, or the AADSTS90002 answer.
    func resolve(_ authority: Route.Authority) -> Result<ResolvedAuthority, STSError> {
        if Self.multiTenantSegments.contains(authority.tenant.lowercased()) {
            return .success(ResolvedAuthority(tenant: nil, segment: authority.tenant, policy: nil))
        }
        guard let tenant = configuration.directory.tenant(named: authority.tenant) else {
            return .failure(.tenantNotFound(authority.tenant))
        }
        return .success(ResolvedAuthority(tenant: tenant, segment: authority.tenant, policy: tenant.isB2C ? authority.policy : nil))
    }

    /// `{base}/{tid}/v2.0`; B2C issuers end in `/` as the platform's do; multi-tenant documents
    /// carry the literal `{tenantid}`.
    func issuer(tenantID: String, b2c: Bool) -> String {
        baseURL + "/" + tenantID + "/v2.0" + (b2c ? "/" : "")
    }

    func errorResponse(_ error: STSError, b2c: Bool, request: HTTPRequest? = nil) -> HTTPResponse {
        let correlation = request?.headers["client-request-id"] ?? Self.newGUID()
        var response = error.response(b2c: b2c, now: clock.now(), traceID: Self.newGUID(), correlationID: correlation)
        if let request, request.headers["return-client-request-id"]?.lowercased() == "true",
            let id = request.headers["client-request-id"]
        {
            response.headers.set("client-request-id", id)
        }
        return response
    }

    /// OpenID Provider Metadata (OpenID Connect Discovery 1.0 §3), shaped like the platform's.
    func discovery(_ authority: Route.Authority) -> HTTPResponse {
        let resolved: ResolvedAuthority
        switch resolve(authority) {
        case .success(let r): resolved = r
        case .failure(let error): return errorResponse(error, b2c: false)
        }
        let root = baseURL + "/" + resolved.path
        let issuer = issuer(tenantID: resolved.tenant?.id ?? "{tenantid}", b2c: resolved.isB2C)
        let body: JSONValue = .object([
            ("token_endpoint", .string(root + "/oauth2/v2.0/token")),
            ("token_endpoint_auth_methods_supported", ["client_secret_post", "private_key_jwt", "client_secret_basic"]),
            ("jwks_uri", .string(root + "/discovery/v2.0/keys")),
            ("response_modes_supported", ["query", "fragment", "form_post"]),
            ("subject_types_supported", ["pairwise"]),
            ("id_token_signing_alg_values_supported", ["RS256"]),
            ("response_types_supported", ["code", "id_token", "code id_token", "id_token token"]),
            ("scopes_supported", ["openid", "profile", "email", "offline_access"]),
            ("issuer", .string(issuer)),
            ("request_uri_parameter_supported", false),
            ("authorization_endpoint", .string(root + "/oauth2/v2.0/authorize")),
            ("end_session_endpoint", .string(root + "/oauth2/v2.0/logout")),
            ("http_logout_supported", true),
            ("frontchannel_logout_supported", true),
            (
                "claims_supported",
                [
                    "sub", "iss", "aud", "exp", "iat", "auth_time", "acr", "nonce", "preferred_username", "name", "tid", "ver",
                    "at_hash", "c_hash", "email",
                ]
            ),
            ("tenant_region_scope", .null),
            ("cloud_instance_name", "microsoftonline.com"),
            ("cloud_graph_host_name", "graph.windows.net"),
            ("msgraph_host", "graph.microsoft.com"),
        ])
        return Self.json(200, body)
    }

    /// The JSON Web Key Set (RFC 7517 §5).
    func keys(_ authority: Route.Authority) -> HTTPResponse {
        if case .failure(let error) = resolve(authority) { return errorResponse(error, b2c: false) }
        if let fault = state.withLock({ $0.takeFault(for: .keys, username: nil) }) {
            var headers: [(String, String)] = []
            if let retryAfter = fault.retryAfter { headers.append(("Retry-After", retryAfter)) }
            return Self.json(fault.status ?? 503, fault.body.map { JSONValue.parse(Array($0.utf8)) ?? .string($0) } ?? .object([]), headers: headers)
        }
        return Self.json(200, ["keys": [key.jwk]])
    }
}
