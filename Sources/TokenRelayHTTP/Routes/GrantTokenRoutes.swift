import HTTPCommon
import IdentityCore
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayStore
import TokenRelayUpstream

/// `POST /v1/tokens/app` and `POST /v1/tokens/on-behalf-of` (behaviour §2, §12 Token requests).
package enum GrantTokenRoutes {
    package static let appFields: Set<String> = ["scopes", "resource", "tenant_id", "authority", "force_refresh", "min_ttl_s", "correlation_id"]
    package static let onBehalfOfFields: Set<String> = ["assertion", "scopes", "resource", "authority", "force_refresh", "min_ttl_s", "correlation_id"]

    package static func register(on router: inout Router, _ services: AppServices) {
        router.add("POST", "/v1/tokens/app", access: .requires(.tokensAcquire), body: .json) { request in
            let body = request.body
            try body.rejectUnknown(allowed: appFields)
            let parsed = try parse(body, services: services, tenantField: true)
            return try await answer(body, request.context, tenantChoosesAuthority: true, issuance: services.issuance) { context in
                try await services.grants.acquireApp(parsed, context: context)
            }
        }
        router.add("POST", "/v1/tokens/on-behalf-of", access: .requires(.tokensAcquire), body: .json) { request in
            let body = request.body
            try body.rejectUnknown(allowed: onBehalfOfFields)
            let assertion = try body.requiredString("assertion")
            let parsed = try parse(body, services: services, tenantField: false)
            return try await answer(body, request.context, tenantChoosesAuthority: false, issuance: services.issuance) { context in
                try await services.grants.acquireOnBehalfOf(assertion: assertion, parsed, context: context)
            }
        }
    }

    /// Scopes, authority (or `tenant_id` on the configured authority's host), `force_refresh`,
    /// `min_ttl_s`; every error names its field.
    package static func parse(_ body: JSONBody, services: AppServices, tenantField: Bool) throws(RelayError) -> GrantTokenService.Request {
        let scopes = try TokenRoutes.requestedScopes(body)
        var authority: Authority?
        if let text = try body.string("authority") {
            if tenantField && body.has("tenant_id") {
                throw RelayError.invalidRequest(field: "tenant_id", "Give 'tenant_id' or 'authority', not both.")
            }
            authority = try services.authorities.validate(text, field: "authority")
        } else if tenantField, let tenant = try body.string("tenant_id") {
            // Held to the rule of every `tenant_id` (behaviour §4.5); `common` and the like go on
            // to the refusal that app tokens come from one tenant.
            if !Authority.isMultiTenantName(tenant) { _ = try AccountLookupRules.tenantId(tenant) }
            let base = services.grants.defaultAuthority
            let candidate = Authority(scheme: base.scheme, host: base.host, port: base.port, tenant: tenant, policy: nil, type: base.type)
            authority = try services.authorities.validate(candidate.url, field: "tenant_id")
        }
        let minTTL = try body.minTTLSeconds()
        return GrantTokenService.Request(
            scopes: scopes, authority: authority, forceRefresh: try body.bool("force_refresh") ?? false, minTTLSeconds: minTTL,
            inputFields: RelayError.InputFields(body, tenantChoosesAuthority: tenantField))
    }

    /// Runs `acquire` under the body's correlation id and writes the token answer; the STS's input
    /// refusals name the member the body chose the scopes or authority with (behaviour §4.1, §4.3).
    private static func answer(
        _ body: JSONBody, _ requestContext: RequestContext, tenantChoosesAuthority: Bool, issuance: IssuanceCounter?,
        _ acquire: (RequestContext) async throws -> GrantTokenService.Result
    ) async throws -> HTTPResponse {
        var context = requestContext
        if let correlationId = try body.correlationId() {
            // Renamed, never rebuilt: the caller's tenant and scope limits must stay with it.
            context = requestContext.renamed(correlationId)
        }
        do {
            let result = try await acquire(context)
            // Counted per (key, owner): `app:{tenant}` or `obo:{sha256}` (behaviour §12 Audit, owners).
            issuance?.record(keyId: context.caller ?? "", accountId: result.token.accountId, uti: result.token.uti)
            return HTTPResponse.tokenAnswer(
                bytes: JSONWriter.encode(tokenBody(result, correlationId: context.correlationId)), correlationId: context.correlationId)
        } catch {
            var problem = RelayError(rendering: error)
            problem.correlationId = context.correlationId
            problem.nameInput(RelayError.InputFields(body, tenantChoosesAuthority: tenantChoosesAuthority))
            throw problem
        }
    }

    /// The answer: `access_token`, `token_type`, `expires_on`, `ext_expires_on` (unix seconds),
    /// `scopes` (canonical), `source`, `correlation_id`; no account (none is involved).
    package static func tokenBody(_ result: GrantTokenService.Result, correlationId: String) -> JSONValue {
        let token = result.token
        return .object([
            "access_token": .string(token.secret), "token_type": .string("Bearer"), "expires_on": .number(Double(token.expiresOn)),
            "ext_expires_on": .number(Double(token.extExpiresOn ?? token.expiresOn)), "scopes": .array(token.scopes.map(JSONValue.string)),
            "source": .string(result.source.rawValue), "correlation_id": .string(correlationId),
        ])
    }
}
