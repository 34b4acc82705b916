import Foundation
import HTTPCommon

extension IdentityPlatformEmulator {
    /// The authorization endpoint (RFC 6749 §4.1.2, PKCE S256 required, RFC 7636). A browser
    /// (`Accept` naming `text/html`) gets the sign-in page (``SignInPage``: pick or type an
    /// account, consent or cancel), as the platform shows one; its form posts the authorize
    /// parameters back here with the choice. Any other client (the tests' HTTP clients, `curl`)
    /// and `prompt=none` get no UI: the user named by `login_hint` (else the tenant's first user)
    /// is signed in at once and the answer redirects with a code. Errors after the redirect URI is
    /// known go to it as `error`, `error_description`, `error_uri`, `state` (RFC 6749 §4.1.2.1);
    /// an unknown client or a missing redirect URI answers 400 directly, as the platform shows an
    /// error page. An unknown `login_hint` redirects `login_required` with AADSTS50034 without
    /// UI; on the page, an unknown account typed is shown the same error and may try again. Cancel
    /// redirects `access_denied` with AADSTS65004 and `error_subcode=cancel`.
    func authorize(_ request: HTTPRequest, authority: Route.Authority) -> Outcome {
        state.withLock { $0.authorizeRequests += 1 }
        let now = clock.now()
        let resolved: ResolvedAuthority
        switch resolve(authority) {
        case .success(let r): resolved = r
        case .failure(let error): return Outcome(response: errorResponse(error, b2c: false))
        }
        // The sign-in page's form posts the authorize parameters back as hidden fields.
        let posted = request.method == "POST"
        let parameters = posted ? FormEncoding.parse(request.body) : request.query
        func value(_ name: String) -> String? { parameters.first { $0.name == name }?.value }
        let clientID = value("client_id") ?? ""
        guard clientID == configuration.clientID else {
            return Outcome(response: errorResponse(.unknownClient(clientID, tenant: resolved.tenant?.id ?? resolved.segment), b2c: false))
        }
        guard let redirectURI = value("redirect_uri"), let redirect = URLComponents(string: redirectURI),
            redirect.scheme != nil, redirect.host != nil
        else {
            return Outcome(response: errorResponse(.missingParameter("redirect_uri"), b2c: false))
        }
        let stateParameter = value("state")
        func redirectError(_ error: STSError, delay: Int = 0, extra: [(String, String)] = []) -> Outcome {
            var parameters = error.redirectParameters(now: now, traceID: Self.newGUID(), correlationID: Self.newGUID()) + extra
            if let stateParameter { parameters.append(("state", stateParameter)) }
            return Outcome(response: Self.redirect(to: redirectURI, parameters), delayMilliseconds: delay)
        }
        guard value("response_type") == "code" else {
            return redirectError(
                STSError(
                    status: 302, error: "unsupported_response_type", code: 700054,
                    message: "response_type '\(value("response_type") ?? "")' is not enabled for the application."))
        }
        guard let challenge = value("code_challenge"), !challenge.isEmpty,
            value("code_challenge_method") == "S256"
        else {
            // The platform requires PKCE only for SPAs (AADSTS9002325); the emulator requires
            // S256 for every client, as TokenRelay always sends it.
            return redirectError(
                STSError(
                    status: 302, error: "invalid_request", code: 9002325,
                    message: "Proof Key for Code Exchange is required; send code_challenge with code_challenge_method S256."))
        }
        guard let scopeText = value("scope") else { return redirectError(.missingParameter("scope")) }
        let scopes: RequestedScopes
        do { scopes = try RequestedScopes.parse(scopeText) } catch {
            return redirectError(error == .severalResources ? .severalResources(scopeText) : .missingParameter("scope"))
        }
        // Made only when a browser is answered with it.
        func page() -> SignInPage {
            SignInPage(
                action: request.path, parameters: parameters.filter { !SignInPage.choiceFields.contains($0.name) }, clientID: clientID,
                directory: resolved.tenant?.id ?? resolved.segment, accounts: pickableAccounts(resolved), scopes: scopeText)
        }
        var hint = value("login_hint")
        if posted {
            switch value("action") {
            case "cancel":
                return redirectError(
                    STSError(status: 302, error: "access_denied", code: 65004, message: "User declined to consent to access the app."),
                    extra: [("error_subcode", "cancel")])
            case "accept":
                let typed = (value("login") ?? "").trimmingCharacters(in: .whitespaces)
                hint = typed.isEmpty ? value("account") : typed
                guard let chosen = hint, !chosen.isEmpty else { return Outcome(response: page().response(hint: nil, error: SignInPage.noAccount)) }
            default:
                return Outcome(response: errorResponse(.missingParameter("action"), b2c: false))
            }
        } else if value("prompt") != "none", request.headers["Accept"]?.lowercased().contains("text/html") == true {
            return Outcome(response: page().response(hint: hint, error: nil))
        }
        guard let (user, tenant) = signInUser(hint: hint, authority: resolved) else {
            if posted { return Outcome(response: page().response(hint: hint, error: SignInPage.unknownAccount)) }
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
            clientID: clientID, redirectURI: redirectURI, codeChallenge: challenge, nonce: value("nonce"),
            username: user.username, tenantID: tenant.id, policy: resolved.policy, scope: scopeText,
            clientInfo: value("client_info") == "1", claims: value("claims"), issuedAt: now)
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
        var answer = [("code", code)]
        if let stateParameter { answer.append(("state", stateParameter)) }
        answer.append(("session_state", Self.derivedGUID("session|" + user.objectID)))
        return Outcome(response: Self.redirect(to: redirectURI, answer), delayMilliseconds: delay)
    }

    /// The accounts the sign-in page offers to pick: the authority's tenant's users (every
    /// non-B2C tenant's for `common` / `organizations`), at most 20 (a scale directory holds
    /// thousands; any of them may still be typed).
    func pickableAccounts(_ authority: ResolvedAuthority) -> [String] {
        let tenants: [TestTenant] = authority.tenant.map { [$0] } ?? configuration.directory.tenants.filter { !$0.isB2C }
        return Array(tenants.lazy.flatMap { $0.users.lazy.map(\.username) }.prefix(20))
    }

    /// The user an authorize request signs in.
    func signInUser(hint: String?, authority: ResolvedAuthority) -> (TestUser, TestTenant)? {
        let candidates: [TestTenant] =
            authority.tenant.map { [$0] } ?? configuration.directory.tenants.filter { !$0.isB2C }
        if let hint, !hint.isEmpty {
            for tenant in candidates {
                if let user = tenant.users.first(where: { $0.username.caseInsensitiveEquals(hint) }) { return (user, tenant) }
            }
            // A guest signs in with their home identity; the grant names the tenant they signed into.
            if let tenant = authority.tenant, tenant.guest(named: hint) != nil, let (user, _) = configuration.directory.user(named: hint) {
                return (user, tenant)
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
