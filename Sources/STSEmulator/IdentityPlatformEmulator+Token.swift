import CryptoBridge
import Foundation
import HTTPCommon

extension IdentityPlatformEmulator {
    /// The fields of a token request body.
    struct TokenForm {
        var fields: [(name: String, value: String)]
        subscript(name: String) -> String? { fields.first { $0.name == name }?.value }
    }

    /// Who a token request is for, found before the grant is checked so that per-user faults
    /// and latency apply without consuming the grant.
    func username(for form: TokenForm) -> String? {
        switch form["grant_type"] {
        case "authorization_code": return form["code"].flatMap { code in state.withLock { $0.codes[code]?.username } }
        case "refresh_token":
            return form["refresh_token"].flatMap { rt in state.withLock { $0.refreshTokens[rt]?.username } ?? seededRecord(rt)?.username }
        case "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return form["assertion"].flatMap { key.verifiedClaims(of: $0) }.flatMap { $0["preferred_username"]?.stringValue }
        default: return nil
        }
    }

    /// The token endpoint (RFC 6749 §3.2; identity platform "OAuth 2.0 authorization code flow",
    /// "client credentials flow", "on-behalf-of flow"): client authentication by
    /// `client_secret` in the body or HTTP Basic (RFC 6749 §2.3.1), or by a certificate client
    /// assertion (RFC 7523 §2.2, `clientAssertionError`), then the grant.
    func token(_ request: HTTPRequest, authority: Route.Authority) -> Outcome {
        let form = TokenForm(fields: FormEncoding.parse(request.body))
        let grantType = form["grant_type"] ?? "(none)"
        state.withLock {
            $0.tokenRequests += 1
            $0.tokenRequestsByGrant[grantType, default: 0] += 1
        }
        var b2c = false
        func fail(_ error: STSError, delay: Int = 0) -> Outcome {
            Outcome(response: errorResponse(error, b2c: b2c, request: request), delayMilliseconds: delay)
        }
        guard request.method == "POST" else {
            return fail(
                STSError(
                    status: 400, error: "invalid_request", code: 900561,
                    message: "The endpoint only accepts POST, OPTIONS requests. Received a \(request.method) request."))
        }
        let resolved: ResolvedAuthority
        switch resolve(authority) {
        case .success(let r): resolved = r
        case .failure(let error): return fail(error)
        }
        b2c = resolved.isB2C

        let username = username(for: form)
        let (fault, controls) = state.withLock { state in
            state.record(
                TokenRequestRecord(
                    grantType: grantType, username: username, scope: form["scope"], claims: form["claims"], traceparent: request.headers["traceparent"]))
            return (state.takeFault(for: .token, username: username), username.map(state.controls(for:)))
        }
        let delay = (controls?.latencyMs ?? 0) + (fault?.latencyMs ?? 0)
        if let fault, !fault.isLatencyOnly {
            return Outcome(response: tokenFaultResponse(fault, b2c: b2c, request: request), delayMilliseconds: delay)
        }

        // Client authentication.
        var clientID = form["client_id"]
        var secret = form["client_secret"]
        if let authorization = request.headers["Authorization"], authorization.lowercased().hasPrefix("basic "),
            let decoded = Base64URLText.decode(String(authorization.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
            let colon = decoded.firstIndex(of: UInt8(ascii: ":"))
        {
            clientID = FormEncoding.decode(String(decoding: decoded[..<colon], as: UTF8.self))
            secret = FormEncoding.decode(String(decoding: decoded[(colon + 1)...], as: UTF8.self))
        }
        guard let clientID else { return fail(.missingParameter("client_id"), delay: delay) }
        guard clientID == configuration.clientID else {
            return fail(.unknownClient(clientID, tenant: resolved.tenant?.id ?? resolved.segment), delay: delay)
        }
        if form["client_assertion"] != nil || form["client_assertion_type"] != nil {
            if let error = clientAssertionError(form, clientID: clientID, tokenURL: baseURL + request.path) { return fail(error, delay: delay) }
        } else if let secret, !secret.isEmpty, !Self.constantTimeEquals(secret, configuration.clientSecret) {
            var error = STSError.invalidClientSecret(clientID: clientID)
            if b2c {
                error = STSError(
                    status: 401, error: "invalid_client", code: 90081,
                    message: "The specified client_secret does not match the expected value for this client. Please correct the client_secret and try again.")
            }
            return fail(error, delay: delay)
        } else if secret?.isEmpty ?? true {
            return fail(.missingClientSecret(), delay: delay)
        }

        let result: Result<JSONValue, STSError>
        switch grantType {
        case "authorization_code": result = redeemCode(form, authority: resolved)
        case "refresh_token": result = redeemRefreshToken(form, authority: resolved)
        case "client_credentials": result = clientCredentials(form, authority: resolved)
        case "urn:ietf:params:oauth:grant-type:jwt-bearer": result = onBehalfOf(form, authority: resolved)
        case "(none)": result = .failure(.missingParameter("grant_type"))
        default: result = .failure(.unsupportedGrantType(grantType))
        }
        switch result {
        case .success(let body):
            var headers = [("Cache-Control", "no-store, no-cache"), ("Pragma", "no-cache"), ("x-ms-request-id", Self.newGUID())]
            if request.headers["return-client-request-id"]?.lowercased() == "true", let id = request.headers["client-request-id"] {
                headers.append(("client-request-id", id))
            }
            return Outcome(response: Self.json(200, body, headers: headers), delayMilliseconds: delay)
        case .failure(let error):
            return fail(b2c ? Self.b2cForm(of: error) : error, delay: delay)
        }
    }

    /// B2C's codes for the grant errors the emulator raises (Azure AD B2C error codes).
    static func b2cForm(of error: STSError) -> STSError {
        var mapped = error
        switch error.code {
        case 50173, 70000:
            mapped.code = 90129
            mapped.message = "The provided grant has been revoked. Please reauthenticate and try again."
        case 70008:
            mapped.code = 90080
            mapped.message = "The provided grant has expired. Please re-authenticate and try again."
        case 9002313:
            mapped.code = 90090
            mapped.message = "The provided grant is not valid."
        default: break
        }
        return mapped
    }

    static func constantTimeEquals(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// The answer a queued token fault gives.
    func tokenFaultResponse(_ fault: Fault, b2c authorityIsB2C: Bool, request: HTTPRequest) -> HTTPResponse {
        let b2c = authorityIsB2C || fault.b2c
        var response: HTTPResponse
        if let body = fault.body {
            var headers = HTTPHeaders()
            if JSONValue.parse(body) != nil { headers.set("Content-Type", "application/json; charset=utf-8") }
            response = HTTPResponse(status: fault.status ?? (fault.retryAfter != nil ? 429 : 500), headers: headers, body: Array(body.utf8))
        } else if fault.error != nil || !fault.errorCodes.isEmpty || fault.claimsChallenge != nil || fault.suberror != nil {
            let code = fault.errorCodes.first ?? (fault.claimsChallenge != nil ? 50076 : 70000)
            let known = STSError.known(code: code)
            var error = STSError(
                status: fault.status ?? known?.status ?? 400,
                error: fault.error ?? (fault.claimsChallenge != nil ? "interaction_required" : known?.error ?? "invalid_grant"),
                code: code, message: fault.errorDescription ?? known?.message ?? "Emulated error.", suberror: fault.suberror ?? known?.suberror)
            error.includesErrorURI = known?.includesErrorURI ?? true
            error.separator = known?.separator ?? " "
            error.claims = fault.claimsChallenge
            error.claimsEncoding = fault.claimsEncoding
            response = errorResponse(error, b2c: b2c, request: request)
            if fault.errorCodes.count > 1, !b2c, var body = JSONValue.parse(response.body), case .object(var members) = body {
                if let index = members.firstIndex(where: { $0.0 == "error_codes" }) {
                    members[index].1 = .array(fault.errorCodes.map(JSONValue.int))
                }
                body = .object(members)
                response.body = body.bytes
            }
        } else {
            switch fault.status ?? 429 {
            case 429: response = HTTPResponse(status: 429, body: Array("Too Many Requests".utf8))  // case 10
            case 503: response = errorResponse(.temporarilyUnavailable(), b2c: b2c, request: request)  // case 11
            case let status:
                var error = STSError.serverError()
                error.status = status
                response = errorResponse(error, b2c: b2c, request: request)
            }
        }
        if let retryAfter = fault.retryAfter { response.headers.set("Retry-After", retryAfter) }
        return response
    }

    // MARK: Grants

    /// `grant_type=authorization_code` with PKCE (RFC 7636 §4.6). A failed check leaves the code
    /// usable; a redeemed code answers AADSTS54005, an old one AADSTS70008.
    func redeemCode(_ form: TokenForm, authority: ResolvedAuthority) -> Result<JSONValue, STSError> {
        guard let code = form["code"] else { return .failure(.missingParameter("code")) }
        guard let redirectURI = form["redirect_uri"] else { return .failure(.missingParameter("redirect_uri")) }
        let now = clock.now()
        guard let grant = state.withLock({ $0.codes[code] }), grant.clientID == configuration.clientID else {
            return .failure(STSError(status: 400, error: "invalid_grant", code: 70000, message: "The provided value for the 'code' parameter is not valid."))
        }
        guard !grant.redeemed else { return .failure(.codeRedeemed()) }
        guard now.timeIntervalSince(grant.issuedAt) <= configuration.codeLifetimeSeconds else { return .failure(.codeExpired()) }
        guard redirectURI == grant.redirectURI else { return .failure(.redirectURIMismatch(redirectURI, clientID: grant.clientID)) }
        guard let verifier = form["code_verifier"] else { return .failure(.missingParameter("code_verifier")) }
        guard Base64URLText.encode(SHA256.hash(Array(verifier.utf8))) == grant.codeChallenge else {
            return .failure(.codeVerifierMismatch())
        }
        guard let (user, tenant) = configuration.directory.user(named: grant.username) else { return .failure(.malformedGrant()) }
        let scopeText = form["scope"] ?? grant.scope
        let scopes: RequestedScopes
        do { scopes = try RequestedScopes.parse(scopeText) } catch { return .failure(.severalResources(scopeText)) }
        let redeemed = state.withLock { state -> Bool in
            guard state.codes[code]?.redeemed == false else { return false }
            state.codes[code]?.redeemed = true
            return true
        }
        guard redeemed else { return .failure(.codeRedeemed()) }
        return issueUserTokens(
            user: user, tenant: tenant, policy: grant.policy, scopes: scopes,
            clientInfo: grant.clientInfo || form["client_info"] == "1", nonce: grant.nonce, claims: form["claims"] ?? grant.claims,
            replacing: nil, signedInto: configuration.directory.tenant(named: grant.tenantID))
    }

    /// `grant_type=refresh_token` with strict rotation: each redemption supersedes the token it
    /// redeems; a superseded token is accepted again only within the rotation grace, and then
    /// answers the chain's newest token instead of forking the chain.
    func redeemRefreshToken(_ form: TokenForm, authority: ResolvedAuthority) -> Result<JSONValue, STSError> {
        guard let presented = form["refresh_token"] else { return .failure(.missingParameter("refresh_token")) }
        guard let scopeText = form["scope"] else { return .failure(.missingParameter("scope")) }
        let now = clock.now()
        let grace = configuration.rotationGraceSeconds
        enum Verdict { case unknown, revoked(EmulatorState.RefreshTokenRecord, Date), superseded, ok(EmulatorState.RefreshTokenRecord, reuse: String?) }
        let seeded = seededRecord(presented)
        let verdict: Verdict = state.withLock { state in
            // A bench-seeded token joins the chains at its first redemption (``ScaleUsers``).
            if state.refreshTokens[presented] == nil, let seeded { state.refreshTokens[presented] = seeded }
            guard let record = state.refreshTokens[presented], record.clientID == configuration.clientID else { return .unknown }
            let key = record.username.lowercased()
            if record.generation != state.generation(for: record.username) {
                state.chains[key, default: .init()].rejectedRevoked += 1
                return .revoked(record, state.revocations[key]?.at ?? now)
            }
            if let supersededAt = record.supersededAt {
                if now.timeIntervalSince(supersededAt) > grace {
                    state.chains[key, default: .init()].rejectedSuperseded += 1
                    return .superseded
                }
                state.chains[key, default: .init()].reusedWithinGrace += 1
                return .ok(record, reuse: state.head(of: presented))
            }
            return .ok(record, reuse: nil)
        }
        let record: EmulatorState.RefreshTokenRecord
        let reuse: String?
        switch verdict {
        case .unknown: return .failure(.malformedGrant())
        case .superseded: return .failure(.supersededGrant())
        case .revoked(let r, let at):
            return .failure(.revokedGrant(issuedAt: Timestamps.dotNet(r.issuedAt), validFrom: Timestamps.dotNet(at)))
        case .ok(let r, let head):
            record = r
            reuse = head
        }
        guard let (user, tenant) = configuration.directory.user(named: record.username) else { return .failure(.malformedGrant()) }
        // A refresh token is redeemable in the tenant it came from, the user's home tenant, and
        // every tenant the user is a guest of (one token across a guest's tenants); elsewhere the
        // platform says the grant belongs to another tenant (cases/33), not that it is malformed.
        if let named = authority.tenant, named.id != record.tenantID, named.id != tenant.id, named.guest(named: user.username) == nil {
            return .failure(.grantForAnotherTenant())
        }
        let scopes: RequestedScopes
        do { scopes = try RequestedScopes.parse(scopeText) } catch { return .failure(.severalResources(scopeText)) }
        let controls = state.withLock { $0.controls(for: user.username) }
        if scopes.permissions.contains(where: { p in controls.consentRequiredScopes.contains { $0.caseInsensitiveEquals(p) } }) {
            return .failure(.consentRequired(clientID: configuration.clientID))
        }
        state.withLock { $0.chains[user.username.lowercased(), default: .init()].redeemed += 1 }
        return issueUserTokens(
            user: user, tenant: tenant, policy: record.policy, scopes: scopes, clientInfo: form["client_info"] == "1", nonce: nil,
            claims: form["claims"], replacing: reuse == nil ? presented : nil, reusing: reuse,
            signedInto: authority.tenant ?? configuration.directory.tenant(named: record.tenantID))
    }

    /// The record of a refresh token `token-relay bench-seed` stored for a scale user (never
    /// redeemed yet), or nil when `token` is not one.
    func seededRecord(_ token: String) -> EmulatorState.RefreshTokenRecord? {
        guard token.hasPrefix("scale."), let scale = configuration.directory.scale, let index = scale.index(ofRefreshToken: token),
            let (user, tenant) = configuration.directory.scaleUser(index)
        else { return nil }
        return EmulatorState.RefreshTokenRecord(
            username: user.username, clientID: configuration.clientID, tenantID: tenant.id, policy: nil, generation: 0, issuedAt: clock.now())
    }

    /// `grant_type=client_credentials`: one `{resource}/.default` scope; an app token with `roles`.
    func clientCredentials(_ form: TokenForm, authority: ResolvedAuthority) -> Result<JSONValue, STSError> {
        guard let scopeText = form["scope"] else { return .failure(.missingParameter("scope")) }
        let items = scopeText.split(separator: " ").map(String.init)
        guard items.count == 1, items[0].lowercased().hasSuffix("/.default") else { return .failure(.clientCredentialsScope(scopeText)) }
        guard let tenant = authority.tenant else { return .failure(.noTenant()) }
        let resource = RequestedScopes.split(items[0]).resource
        let now = Int(clock.now().timeIntervalSince1970)
        let lifetime = configuration.defaultExpiresIn
        let appObjectID = Self.derivedGUID("sp|" + configuration.clientID + "|" + tenant.id)
        let claims: JSONValue = .object([
            ("aud", .string(RequestedScopes.audience(of: resource))), ("iss", .string(issuer(tenantID: tenant.id, b2c: tenant.isB2C))),
            ("iat", .int(now)), ("nbf", .int(now)), ("exp", .int(now + lifetime)), ("azp", .string(configuration.clientID)),
            ("appid", .string(configuration.clientID)), ("idtyp", "app"), ("oid", .string(appObjectID)),
            ("roles", .array((configuration.directory.appRoles[resource] ?? []).map(JSONValue.string))), ("sub", .string(appObjectID)),
            ("tid", .string(tenant.id)), ("uti", .string(opaqueToken(prefix: ""))), ("ver", "2.0"),
        ])
        guard let accessToken = try? key.makeJWT(claims: claims) else { return .failure(.serverError()) }
        state.withLock { $0.issued.record(accessToken, .accessToken) }
        return .success(
            .object([
                ("token_type", "Bearer"), ("expires_in", .int(lifetime)), ("ext_expires_in", .int(lifetime)),
                ("access_token", .string(accessToken)),
            ]))
    }

    /// `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` (on-behalf-of): `assertion` must
    /// be an unexpired access token this emulator issued for `aud` = this client.
    func onBehalfOf(_ form: TokenForm, authority: ResolvedAuthority) -> Result<JSONValue, STSError> {
        guard let assertion = form["assertion"] else { return .failure(.missingParameter("assertion")) }
        guard form["requested_token_use"] == "on_behalf_of" else { return .failure(.missingParameter("requested_token_use")) }
        guard let scopeText = form["scope"] else { return .failure(.missingParameter("scope")) }
        guard let claims = key.verifiedClaims(of: assertion) else { return .failure(.assertionInvalid("The key was not found.")) }
        guard let exp = claims["exp"]?.intValue, Double(exp) > clock.now().timeIntervalSince1970 else { return .failure(.assertionExpired()) }
        let audience = claims["aud"]?.stringValue ?? ""
        guard audience == configuration.clientID || audience == "api://" + configuration.clientID else {
            return .failure(
                STSError(
                    status: 400, error: "invalid_grant", code: 50013, message: "Assertion audience does not match the Client app presenting the assertion."))
        }
        guard let oid = claims["oid"]?.stringValue,
            let tenant = configuration.directory.tenants.first(where: { $0.users.contains { $0.objectID == oid } }),
            let user = tenant.users.first(where: { $0.objectID == oid })
        else { return .failure(.assertionInvalid("The user was not found.")) }
        let scopes: RequestedScopes
        do { scopes = try RequestedScopes.parse(scopeText) } catch { return .failure(.severalResources(scopeText)) }
        return issueUserTokens(
            user: user, tenant: tenant, policy: nil, scopes: scopes, clientInfo: form["client_info"] == "1", nonce: nil,
            claims: form["claims"], replacing: nil)
    }

    // MARK: Minting

    /// A successful user-token response in the field order of case 13.
    /// - Parameters:
    ///   - replacing: the refresh token this redemption supersedes (when a new one is issued).
    ///   - reusing: a chain head to hand out again instead of a new refresh token (grace reuse).
    func issueUserTokens(
        user: TestUser, tenant: TestTenant, policy: String?, scopes: RequestedScopes, clientInfo: Bool, nonce: String?,
        claims: String?, replacing: String?, reusing: String? = nil, signedInto: TestTenant? = nil
    ) -> Result<JSONValue, STSError> {
        let date = clock.now()
        // `tenant` is the home tenant (client_info); a guest's tokens carry the other tenant's tid and oid.
        let home = tenant
        let (tenant, objectID) = guestProfile(of: user, home: home, signedInto: signedInto)
        let now = Int(date.timeIntervalSince1970)
        let controls = state.withLock { $0.controls(for: user.username) }
        let resource = scopes.resource ?? RequestedScopes.graphResource
        var effective = scopes
        effective.resource = resource
        var permissions = scopes.permissions
        if scopes.isDefault { permissions = resource == RequestedScopes.graphResource ? ["User.Read"] : ["user_impersonation"] }
        if resource == RequestedScopes.graphResource {
            permissions += controls.consentedScopes.filter { c in !permissions.contains { $0.caseInsensitiveEquals(c) } }
        }
        permissions = permissions.filter { p in !controls.declinedScopes.contains { $0.caseInsensitiveEquals(p) } }
        permissions.sort { $0.lowercased() < $1.lowercased() }
        let oidcGranted = scopes.wantsIDToken ? ["openid", "profile", "email"] : []
        let scopeField = (permissions.map(effective.responseForm(of:)) + oidcGranted).joined(separator: " ")
        let expiresIn = controls.expiresIn ?? configuration.defaultExpiresIn
        let extExpiresIn = controls.extExpiresIn ?? expiresIn
        let iss = issuer(tenantID: tenant.id, b2c: tenant.isB2C)
        let sub = String(Base64URLText.encode(SHA256.hash(Array((objectID + "|" + configuration.clientID).utf8))).prefix(43))

        var accessClaims: [(String, JSONValue)] = [
            ("aud", .string(RequestedScopes.audience(of: resource))), ("iss", .string(iss)), ("iat", .int(now)), ("nbf", .int(now)),
            ("exp", .int(now + expiresIn)), ("azp", .string(configuration.clientID)), ("appid", .string(configuration.clientID)),
            ("name", .string(user.name)), ("given_name", .string(user.givenName)), ("family_name", .string(user.surname)),
            ("oid", .string(objectID)), ("preferred_username", .string(user.username)),
            ("scp", .string((permissions + oidcGranted).joined(separator: " "))), ("sub", .string(sub)), ("tid", .string(tenant.id)),
        ]
        if !tenant.isB2C { accessClaims.append(("upn", .string(user.username))) }
        accessClaims.append(("uti", .string(opaqueToken(prefix: ""))))
        accessClaims.append(("ver", "2.0"))
        if let claims, let capabilities = JSONValue.parse(claims)?["access_token"]?["xms_cc"]?["values"] {
            accessClaims.append(("xms_cc", capabilities))
        }
        if let policy { accessClaims.append(("tfp", .string(policy))) }

        var idToken: String?
        if scopes.wantsIDToken {
            var idClaims: [(String, JSONValue)] = [
                ("ver", "2.0"), ("iss", .string(iss)), ("sub", .string(tenant.isB2C ? objectID : sub)),
                ("aud", .string(configuration.clientID)), ("exp", .int(now + 3600)), ("iat", .int(now)), ("nbf", .int(now)),
            ]
            if let nonce { idClaims.append(("nonce", .string(nonce))) }
            idClaims.append(("name", .string(user.name)))
            if tenant.isB2C {
                idClaims.append(("emails", [.string(user.username)]))
                if let policy { idClaims.append(("tfp", .string(policy))) }
            } else {
                idClaims.append(("preferred_username", .string(user.username)))
            }
            idClaims += [("oid", .string(objectID)), ("tid", .string(tenant.id))]
            idToken = try? key.makeJWT(claims: .object(idClaims))
        }
        guard let accessToken = try? key.makeJWT(claims: .object(accessClaims)) else { return .failure(.serverError()) }

        var refreshToken: String?
        if scopes.wantsRefreshToken && !controls.omitRefreshToken {
            if let reusing {
                refreshToken = reusing
            } else {
                let newToken = opaqueToken(prefix: "1.AXkA")
                refreshToken = newToken
                state.withLock { state in
                    let record = EmulatorState.RefreshTokenRecord(
                        username: user.username, clientID: configuration.clientID, tenantID: home.id, policy: policy,
                        generation: state.generation(for: user.username), issuedAt: date)
                    state.refreshTokens[newToken] = record
                    state.chains[user.username.lowercased(), default: .init()].issued += 1
                    if let replacing, state.refreshTokens[replacing]?.supersededAt == nil {
                        state.refreshTokens[replacing]?.supersededAt = date
                        state.refreshTokens[replacing]?.successor = newToken
                    }
                }
            }
        }

        state.withLock { state in
            state.issued.record(accessToken, .accessToken)
            if let idToken { state.issued.record(idToken, .idToken) }
            if let refreshToken, reusing == nil { state.issued.record(refreshToken, .refreshToken) }
        }
        // Numbers as digit strings when the user's controls ask for it (behaviour §5: the platform is inconsistent).
        let number: (Int) -> JSONValue = { controls.numbersAsStrings ? .string(String($0)) : .int($0) }
        var body: [(String, JSONValue)] = [
            ("token_type", "Bearer"), ("scope", .string(scopeField)), ("expires_in", number(expiresIn)), ("ext_expires_in", number(extExpiresIn)),
        ]
        if let refreshIn = controls.refreshIn { body.append(("refresh_in", number(refreshIn))) }
        body.append(("access_token", .string(accessToken)))
        if let refreshToken { body.append(("refresh_token", .string(refreshToken))) }
        if let idToken { body.append(("id_token", .string(idToken))) }
        if clientInfo {
            let uid = policy.map { user.objectID + "-" + $0.lowercased() } ?? user.objectID  // always the home oid
            let info: JSONValue = ["uid": .string(uid), "utid": .string(home.id)]
            body.append(("client_info", .string(Base64URLText.encode(info.bytes))))
        }
        if let familyID = controls.familyID, refreshToken != nil { body.append(("foci", .string(familyID))) }
        return .success(.object(body))
    }
}
