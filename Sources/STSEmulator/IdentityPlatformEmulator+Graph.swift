import Foundation
import HTTPCommon

extension IdentityPlatformEmulator {
    /// Microsoft Graph: checks the bearer token's signature, audience and expiry, then answers
    /// `resource`. Errors use Graph's envelope
    /// `{"error":{"code","message","innerError":{"date","request-id","client-request-id"}}}`; a 401
    /// carries `WWW-Authenticate` as in case 18 (unquoted `authorization_uri`, padded base64
    /// `claims` for a claims challenge). Source: learn.microsoft.com "Microsoft Graph error
    /// responses", "Claims challenges".
    ///
    /// `.me` is `GET /v1.0/me`, the signed-in user; `.messages` the drafts of
    /// `graphMessages`; `.sendMail` and `.batch` are in `+GraphMail` and `+GraphBatch`.
    /// `.user` is `GET /v1.0/users/{id | userPrincipalName}`, which an app-only token (client
    /// credentials, `roles` holding `User.Read.All`) may call as well as a user's. Every request
    /// is counted and logged (`GET /_control/graph-requests`) with whether its token verified.
    func graph(_ request: HTTPRequest, _ resource: GraphResource) -> Outcome {
        let bearer = request.headers["Authorization"].flatMap { value in
            value.lowercased().hasPrefix("bearer ") ? String(value.dropFirst(7)).trimmingCharacters(in: .whitespaces) : nil
        }
        let verified = bearer.flatMap { $0.isEmpty ? nil : key.verifiedClaims(of: $0) }
        state.withLock {
            $0.graphRequests += 1
            $0.graphRequestsByMethod[request.method, default: 0] += 1
            $0.record(
                GraphRequestRecord(
                    method: request.method, path: request.path, query: request.query, tokenVerified: verified != nil,
                    traceparent: request.headers["traceparent"], tracestate: request.headers["tracestate"]))
        }
        let now = clock.now()
        let requestID = Self.newGUID()
        let clientRequestID = request.headers["client-request-id"] ?? requestID
        let echo = [("request-id", requestID), ("client-request-id", clientRequestID)]

        func graphError(_ status: Int, _ code: String, _ message: String, extra: [(String, String)] = []) -> HTTPResponse {
            let body: JSONValue = [
                "error": [
                    "code": .string(code), "message": .string(message),
                    "innerError": [
                        "date": .string(Timestamps.graph(now)), "request-id": .string(requestID), "client-request-id": .string(clientRequestID),
                    ],
                ]
            ]
            var response = HTTPResponse(status: status, headers: HTTPHeaders([("Content-Type", "application/json")] + echo), body: body.bytes)
            for (name, value) in extra { response.headers.set(name, value) }
            return response
        }
        let challengeBase = "Bearer realm=\"\", authorization_uri=\(baseURL)/common/oauth2/authorize, client_id=\"\(RequestedScopes.graphAppID)\""
        func unauthorized(_ message: String) -> Outcome {
            Outcome(response: graphError(401, "InvalidAuthenticationToken", message, extra: [("WWW-Authenticate", challengeBase)]))
        }

        guard let bearer, !bearer.isEmpty else { return unauthorized("Access token is empty.") }
        guard let claims = verified else {
            return unauthorized("Access token validation failure. Invalid signature or malformed token.")
        }
        let audience = claims["aud"]?.stringValue ?? ""
        guard audience == RequestedScopes.graphAppID || audience == RequestedScopes.graphResource else {
            return unauthorized("Access token validation failure. Invalid audience.")
        }
        guard let exp = claims["exp"]?.intValue, Double(exp) > now.timeIntervalSince1970 else {
            return unauthorized("Lifetime validation failed, the token is expired.")
        }
        let username = claims["preferred_username"]?.stringValue
        let (fault, controls) = state.withLock { ($0.takeFault(for: .graph, username: username), username.map($0.controls(for:))) }
        let delay = (controls?.latencyMs ?? 0) + (fault?.latencyMs ?? 0)
        if let fault, !fault.isLatencyOnly {
            return Outcome(response: graphFaultResponse(fault, graphError: graphError, challengeBase: challengeBase), delayMilliseconds: delay)
        }
        let owner = claims["oid"]?.stringValue ?? ""
        func echoed(_ response: HTTPResponse) -> Outcome {
            var outcome = Outcome(response: response, delayMilliseconds: delay)
            for (name, value) in echo { outcome.response.headers.set(name, value) }
            return outcome
        }
        var userId: String?
        switch resource {
        case .messages(let messageId): return echoed(graphMessages(request, id: messageId, owner: owner, graphError: graphError))
        case .sendMail: return echoed(graphSendMail(request, owner: owner, graphError: graphError))
        case .batch:
            var outcome = graphBatch(request, graphError: graphError)
            outcome.delayMilliseconds += delay
            for (name, value) in echo { outcome.response.headers.set(name, value) }
            return outcome
        case .user(let id): userId = id
        case .me: break
        }
        let isApp = claims["idtyp"]?.stringValue == "app"
        if isApp && userId == nil {
            return Outcome(response: graphError(400, "BadRequest", "/me request is only valid with delegated authentication flow."), delayMilliseconds: delay)
        }
        if isApp, !(claims["roles"]?.arrayValue ?? []).contains(where: { $0.stringValue == "User.Read.All" }) {
            return Outcome(
                response: graphError(403, "Authorization_RequestDenied", "Insufficient privileges to complete the operation."), delayMilliseconds: delay)
        }
        let wanted = userId ?? claims["oid"]?.stringValue
        guard let wanted,
            let user = configuration.directory.tenants.lazy.flatMap(\.users).first(where: {
                $0.objectID == wanted || $0.username.lowercased() == wanted.lowercased()
            })
        else {
            return Outcome(
                response: graphError(
                    404, "Request_ResourceNotFound",
                    "Resource '\(wanted ?? "")' does not exist or one of its queried reference-property objects are not present."),
                delayMilliseconds: delay)
        }
        let body: JSONValue = .object([
            ("@odata.context", "https://graph.microsoft.com/v1.0/$metadata#users/$entity"),
            ("businessPhones", []), ("displayName", .string(user.name)), ("givenName", .string(user.givenName)),
            ("jobTitle", .null), ("mail", .string(user.username)), ("mobilePhone", .null), ("officeLocation", .null),
            ("preferredLanguage", .null), ("surname", .string(user.surname)), ("userPrincipalName", .string(user.username)),
            ("id", .string(user.objectID)),
        ])
        var response = HTTPResponse(
            status: 200,
            headers: HTTPHeaders(
                [("Content-Type", "application/json;odata.metadata=minimal;odata.streaming=true;IEEE754Compatible=false;charset=utf-8")] + echo),
            body: body.bytes)
        response.headers.set("Cache-Control", "no-cache")
        return Outcome(response: response, delayMilliseconds: delay)
    }

    func graphFaultResponse(
        _ fault: Fault, graphError: (Int, String, String, [(String, String)]) -> HTTPResponse, challengeBase: String
    ) -> HTTPResponse {
        var response: HTTPResponse
        if let claims = fault.claimsChallenge {
            let encoded = Data(claims.utf8).base64EncodedString()  // standard base64 with '=' padding, as Graph sends
            let header =
                challengeBase
                + ", error=\"insufficient_claims\", claims=\"\(encoded)\", errorDescription=\"Continuous access evaluation resulted in claims challenge with result: InteractionRequired and code: TokenIssuedBeforeRevocationTimestamp\""
            response = graphError(
                fault.status ?? 401, fault.error ?? "InvalidAuthenticationToken",
                fault.errorDescription
                    ?? "Continuous access evaluation resulted in challenge with result: InteractionRequired and code: TokenIssuedBeforeRevocationTimestamp",
                [("WWW-Authenticate", header)])
        } else {
            let status = fault.status ?? (fault.retryAfter != nil ? 429 : 500)
            let (code, message): (String, String) =
                switch status {
                case 429: ("TooManyRequests", "The server is busy. Please try again later.")  // case 21
                case 503: ("serviceNotAvailable", "The service is temporarily unavailable. Please try again later.")
                case 401: ("InvalidAuthenticationToken", "Access token validation failure.")
                case 403: ("Authorization_RequestDenied", "Insufficient privileges to complete the operation.")
                default: ("generalException", "An unexpected error occurred.")
                }
            response = graphError(status, fault.error ?? code, fault.errorDescription ?? message, status == 401 ? [("WWW-Authenticate", challengeBase)] : [])
            if let body = fault.body {
                response.body = Array(body.utf8)
                if JSONValue.parse(body) == nil { response.headers.remove("Content-Type") }
            }
        }
        if let retryAfter = fault.retryAfter { response.headers.set("Retry-After", retryAfter) }
        return response
    }
}
