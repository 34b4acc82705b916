import HTTPCommon
import IdentityCore
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayUpstream

/// `POST /v1/tokens/silent` (behaviour §2, §12 Token requests).
package enum TokenRoutes {
    package static let silentFields: Set<String> = [
        "account_id", "home_account_id", "username", "tenant_id", "scopes", "resource", "authority", "claims", "force_refresh",
        "min_ttl_s", "allow_partial", "correlation_id",
    ]

    package static func register(on router: inout Router, _ services: AppServices) {
        router.add(
            "POST", "/v1/tokens/silent", access: .requires(.tokensAcquire), body: .raw,
            prepare: { request throws(RelayError) in try prepare(&request, services: services) }
        ) { request in
            // The pipeline ran `prepare` first: the body is read, the scopes canonical, and the
            // plan taken as far as memory goes; it carries on from there.
            guard let plan = request.silentPlan else { throw RelayError(.internal, "The silent request was not prepared.") }
            do {
                let result = try await services.tokens.acquire(continuing: plan, context: request.context)
                return answer(result, plan.request, request.context, services: services)
            } catch {
                var problem = named(error, plan.request, request.context)
                problem.nameInput(plan.request.inputFields)
                throw problem
            }
        }
    }

    /// The silent route's preparation (see ``RoutePreparation``): reads the body once, names the
    /// request by the body's `correlation_id`, and takes the request's ``SilentPlan`` as far as
    /// memory goes: the answer when memory has it (a cached token, a dead account, a replayed
    /// interaction-required problem), the plan for the handler otherwise.
    /// - Returns: the answer, or nil for the handler to acquire the token.
    /// - Throws: `RelayError` 415, 400 (`field` named), 403; memory's problems named by the body's
    ///   correlation id, as the handler names its own.
    package static func prepare(_ request: inout RouteRequest, services: AppServices) throws(RelayError) -> HTTPResponse? {
        // Through the shared reference: `request` is changed below, and lending its `http` across
        // that copied every field of the request.
        let received = request.received
        var (silent, bodyCorrelationId) = try read(received.http, authorities: services.authorities)
        if let bodyCorrelationId { request.context = request.context.renamed(bodyCorrelationId) }
        let context = request.context
        // An external id this replica resolved recently names its account for both steps
        // (behaviour §3.7; one resolution, ADR 0013); any other is left to the suspended step.
        if silent.mayNameExternalId, let resolved = services.tokens.resolver.resolvedFromMemory(silent.account, owner: context.owner) {
            silent.account = resolved
        }
        var plan = services.tokens.plan(silent, access: context.access)
        do {
            guard let result = try services.tokens.answerFromMemory(&plan, owner: context.owner) else {
                request.silentPlan = plan
                return nil
            }
            return answer(result, silent, context, services: services)
        } catch {
            throw named(error, silent, context)
        }
    }

    /// The one reading of a silent-token body: content type (415), JSON (``JSONBody``), fields
    /// and canonical scopes (``parseSilent(_:authorities:)``), then `correlation_id`, remembered
    /// for repeated bodies (``SilentBodyMemo``).
    /// - Returns: the request and the body's non-empty `correlation_id`.
    package static func read(_ http: HTTPRequest, authorities: AuthorityValidator) throws(RelayError) -> (SilentTokenRequest, String?) {
        try JSONBody.requireJSON(http)
        return try SilentBodyMemo.shared.request(body: http.body) { bytes throws(RelayError) in
            let body = try JSONBody(bytes: bytes)
            let silent = try parseSilent(body, authorities: authorities)
            return (silent, try body.correlationId())
        }
    }

    /// The token answer, counted for the issuance audit.
    private static func answer(_ result: SilentTokenResult, _ silent: SilentTokenRequest, _ context: RequestContext, services: AppServices) -> HTTPResponse {
        services.issuance?.record(keyId: context.caller ?? "", accountId: result.account.accountId, uti: result.token.uti, utiHash: result.token.utiHash)
        return HTTPResponse.tokenAnswer(
            bytes: tokenBody(result, correlationId: context.correlationId, allowPartial: silent.allowPartial, owner: context.owner),
            correlationId: context.correlationId)
    }

    /// The problem for `error`, named by the request's correlation id (the body's when it gave
    /// one); a 404 `account_not_found` names the member that named the account (`account_id`,
    /// `home_account_id` or `username`, behaviour §2.2).
    private static func named(_ error: any Error, _ silent: SilentTokenRequest, _ context: RequestContext) -> RelayError {
        var problem = RelayError(rendering: error)
        problem.correlationId = context.correlationId
        if problem.code == .accountNotFound, problem.extensions["field"] == nil { problem.extensions["field"] = .string(silent.account.member) }
        return problem
    }

    /// Validates the body into a request; every error names its field.
    package static func parseSilent(_ body: JSONBody, authorities: AuthorityValidator) throws(RelayError) -> SilentTokenRequest {
        try body.rejectUnknown(allowed: silentFields)
        let selectors = ["account_id", "home_account_id", "username"].filter { body.has($0) }
        guard selectors.count == 1 else {
            throw RelayError.invalidRequest(field: "account_id", "Give exactly one of 'account_id', 'home_account_id' or 'username'.")
        }
        let account: SilentTokenRequest.AccountSelector
        switch selectors[0] {
        // `has` made sure the selector is given and not null.
        case "account_id": account = .accountId(try body.identifier("account_id")!)
        case "home_account_id": account = .homeAccountId(try body.identifier("home_account_id")!)
        default:
            account = .username(
                try AccountLookupRules.username(body.identifier("username")!), tenantId: try body.identifier("tenant_id").map(AccountLookupRules.tenantId))
        }
        if body.has("tenant_id") && selectors[0] != "username" {
            throw RelayError.invalidRequest(field: "tenant_id", "'tenant_id' narrows a 'username' lookup; it cannot be used with '\(selectors[0])'.")
        }
        let scopes = try requestedScopes(body)
        let authority = try body.string("authority").map { text throws(RelayError) in try authorities.validate(text, field: "authority") }
        let minTTL = try body.minTTLSeconds()
        return SilentTokenRequest(
            account: account, scopes: scopes, authority: authority, claims: try body.claims("claims"),
            forceRefresh: try body.bool("force_refresh") ?? false, minTTLSeconds: minTTL, allowPartial: try body.bool("allow_partial") ?? false,
            inputFields: RelayError.InputFields(body, tenantChoosesAuthority: false))
    }

    /// `scopes` or the legacy `resource` (not both), under the rules of behaviour §1.
    package static func requestedScopes(_ body: JSONBody) throws(RelayError) -> ScopeSet {
        if body.has("scopes") && body.has("resource") {
            throw RelayError(.invalidScope, "Give 'scopes' or the legacy 'resource', not both.", extensions: ["field": .string("resource")])
        }
        let scopes = try body.stringArray("scopes")
        let resource = try body.string("resource")
        guard scopes != nil || resource != nil else {
            throw RelayError(.invalidScope, "'scopes' is required.", extensions: ["field": .string("scopes")])
        }
        do {
            return try RequestedScopes.shared.normalize(scopes: scopes, resource: resource)
        } catch {
            throw RelayError(.invalidScope, error.detail, extensions: ["field": .string(error.field)])
        }
    }

    /// The token answer (behaviour §2 response 200) as JSON bytes: the parts memory made when it
    /// stored the token when it served it (``TokenAnswerBytes``), else the same parts made now.
    /// - Parameter owner: the caller's key name: the account object shows its external id (behaviour §3.7).
    package static func tokenBody(_ result: SilentTokenResult, correlationId: String, allowPartial: Bool, owner: String? = nil) -> [UInt8] {
        let declined = allowPartial ? result.declinedScopes : []
        let parts =
            if let prebuilt = result.prebuiltAnswer, declined.isEmpty, !result.extendedLifetime, result.source == .cache {
                prebuilt
            } else {
                TokenAnswerBytes(token: result.token, source: result.source, declinedScopes: declined, extendedLifetime: result.extendedLifetime)
            }
        return parts.answer(account: result.account, owner: owner, correlationId: correlationId, into: BodyBuffers.shared.take())
    }
}
