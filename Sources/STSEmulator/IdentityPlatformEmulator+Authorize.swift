import Foundation
import HTTPCommon

extension IdentityPlatformEmulator {
    /// The authorization endpoint without UI: signs in the user named by `login_hint` (else the
    /// tenant's first user) and redirects with a code (RFC 6749 §4.1.2, PKCE S256 required,
    /// RFC 7636). Errors after the redirect URI is known go to it as `error`,
    /// `error_description`, `error_uri`, `state` (RFC 6749 §4.1.2.1); an unknown client or a
    /// missing redirect URI answers 400 directly, as the platform shows an error page.
    /// An unknown `login_hint` redirects `login_required` with AADSTS50034 (the platform would
    /// show its sign-in page; without UI the emulator cannot).
    func authorize(_ request: HTTPRequest, authority: Route.Authority) -> Outcome {
        state.withLock { $0.authorizeRequests += 1 }
        let now = clock.now()
        let resolved: ResolvedAuthority
        switch resolve(authority) {
        case .success(let r): resolved = r
        case .failure(let error): return Outcome(response: errorResponse(error, b2c: false))
        }
        let clientID = request.queryValue("client_id") ?? ""
        guard clientID == configuration.clientID else {
            return Outcome(response: errorResponse(.unknownClient(clientID, tenant: resolved.tenant?.id ?? resolved.segment), b2c: false))
        }
        guard let redirectURI = request.queryValue("redirect_uri"), let redirect = URLComponents(string: redirectURI),
            redirect.scheme != nil, redirect.host != nil
        else {
            return Outcome(response: errorResponse(.missingParameter("redirect_uri"), b2c: false))
        }
        let stateParameter = request.queryValue("state")
        func redirectError(_ error: STSError, delay: Int = 0) -> Outcome {
            var parameters = error.redirectParameters(now: now, traceID: Self.newGUID(), correlationID: Self.newGUID())
            if let stateParameter { parameters.append(("state", stateParameter)) }
            return Outcome(response: Self.redirect(to: redirectURI, parameters), delayMilliseconds: delay)
        }
        guard request.queryValue("response_type") == "code" else {
            return redirectError(
                STSError(
                    status: 302, error: "unsupported_response_type", code: 700054,
                    message: "response_type '\(request.queryValue("response_type") ?? "")' is not enabled for the application."))
        }
        guard let challenge = request.queryValue("code_challenge"), !challenge.isEmpty,
            request.queryValue("code_challenge_method") == "S256"
        else {
            // The platform requires PKCE only for SPAs (AADSTS9002325); the emulator requires
            // S256 for every client, as TokenRelay always sends it.
            return redirectError(
                STSError(
                    status: 302, error: "invalid_request", code: 9002325,
                    message: "Proof Key for Code Exchange is required; send code_challenge with code_challenge_method S256."))
        }
        guard let scopeText = request.queryValue("scope") else { return redirectError(.missingParameter("scope")) }
        let scopes: RequestedScopes
        do { scopes = try RequestedScopes.parse(scopeText) } catch {
            return redirectError(error == .severalResources ? .severalResources(scopeText) : .missingParameter("scope"))
        }
        guard let (user, tenant) = signInUser(hint: request.queryValue("login_hint"), authority: resolved) else {
            return redirectError(
                STSError(
                    status: 302, error: "login_required", code: 50034,
                    message:
                        "The user account {EUII Hidden} does not exist in the '\(resolved.tenant?.id ?? resolved.segment)' directory. To sign into this application, the account must be added to the directory."
                ))
        }
        let (fault, controls) = state.withLock { ($0.takeFault(for: .authorize, username: user.username), $0.controls(for: user.username)) }
        let delay = controls.latencyMs + (fault?.latencyMs ?? 0)
        if let fault, !fault.isLatencyOnly {
            if let status = fault.status, status != 302 {
                var headers = HTTPHeaders()
                if let retryAfter = fault.retryAfter { headers.set("Retry-After", retryAfter) }
                return Outcome(response: HTTPResponse(status: status, headers: headers, body: Array((fault.body ?? "").utf8)), delayMilliseconds: delay)
            }
            let code = fault.errorCodes.first ?? 50000
            let known = STSError.known(code: code)
            return redirectError(
                STSError(
                    status: 302, error: fault.error ?? known?.error ?? "server_error", code: code,
                    message: fault.errorDescription ?? known?.message ?? "Emulated error."), delay: delay)
        }
        if controls.declineConsent {
            return redirectError(
                STSError(status: 302, error: "access_denied", code: 65004, message: "User declined to consent to access the app."), delay: delay)
        }
        let code = opaqueToken(prefix: "1.AXkA")
        let grant = EmulatorState.CodeGrant(
            clientID: clientID, redirectURI: redirectURI, codeChallenge: challenge, nonce: request.queryValue("nonce"),
            username: user.username, tenantID: tenant.id, policy: resolved.policy, scope: scopeText,
            clientInfo: request.queryValue("client_info") == "1", claims: request.queryValue("claims"), issuedAt: now)
        state.withLock { state in
            state.codes = state.codes.filter { now.timeIntervalSince($0.value.issuedAt) < configuration.codeLifetimeSeconds }
            state.codes[code] = grant
            state.issued.record(code, .code)
            // An interactive authorization consents to what it asked for.
            let key = user.username.lowercased()
            var userControls = state.controls[key] ?? UserControls()
            userControls.consentRequiredScopes.removeAll { name in scopes.permissions.contains { $0.caseInsensitiveEquals(name) } }
            if state.controls[key] != nil { state.controls[key] = userControls }
        }
        var parameters = [("code", code)]
        if let stateParameter { parameters.append(("state", stateParameter)) }
        parameters.append(("session_state", Self.derivedGUID("session|" + user.objectID)))
        return Outcome(response: Self.redirect(to: redirectURI, parameters), delayMilliseconds: delay)
    }

    /// The user an authorize request signs in.
    func signInUser(hint: String?, authority: ResolvedAuthority) -> (TestUser, TestTenant)? {
        let candidates: [TestTenant] =
            authority.tenant.map { [$0] } ?? configuration.directory.tenants.filter { !$0.isB2C }
        if let hint, !hint.isEmpty {
            for tenant in candidates {
                if let user = tenant.users.first(where: { $0.username.caseInsensitiveEquals(hint) }) { return (user, tenant) }
            }
            return nil
        }
        for tenant in candidates { if let user = tenant.users.first { return (user, tenant) } }
        return nil
    }

    /// 302 to `uri` with `parameters` added to its query (an existing query is kept).
    static func redirect(to uri: String, _ parameters: [(String, String)]) -> HTTPResponse {
        var target = uri
        var fragment = ""
        if let hash = target.firstIndex(of: "#") {
            fragment = String(target[hash...])
            target = String(target[..<hash])
        }
        let query = FormEncoding.serialize(parameters)
        if target.contains("?") {
            target += (target.hasSuffix("?") || target.hasSuffix("&") ? "" : "&") + query
        } else {
            target += "?" + query
        }
        return HTTPResponse(status: 302, headers: HTTPHeaders([("Location", target + fragment), ("Cache-Control", "no-store, no-cache")]))
    }
}
