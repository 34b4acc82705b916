import HTTPCommon

extension IdentityPlatformEmulator {
    /// The control API: no authentication (a loopback test tool).
    /// - `GET /_control/stats` → counters (`token_requests`, `token_requests_by_grant`,
    ///   `graph_requests`, `graph_requests_by_method`, `sent_mail`, `authorize_requests`, `refresh_token_chain`, `pending_faults`).
    /// - `GET /_control/issued` → the newest tokens and codes handed out (`access_tokens`,
    ///   `refresh_tokens`, `id_tokens`, `codes`), for tests that check none leaks.
    /// - `GET /_control/token-requests` → `{"requests": [{grant_type, username, scope, claims}]}`,
    ///   the newest token requests' non-secret parameters, oldest first.
    /// - `GET /_control/graph-requests` → `{"requests": [{method, path, query, token_verified}]}`,
    ///   the newest Graph requests (batch sub-requests too), oldest first, without tokens.
    /// - `POST /_control/reset` → clears faults, counters and per-user settings.
    /// - `GET|POST /_control/users/{username}` → reads or changes `UserControls`; the body's
    ///   `revoke_refresh_tokens: true` makes every refresh token issued so far answer AADSTS50173.
    /// - `POST /_control/users/{username}/adal-refresh-token` → mints an ADAL-era refresh token.
    /// - `POST /_control/faults` → queues a `Fault`; `DELETE /_control/faults` drops all.
    func control(_ request: HTTPRequest, segments: [String]) -> HTTPResponse {
        func bad(_ message: String, status: Int = 400) -> HTTPResponse {
            Self.json(status, ["error": status == 404 ? "not_found" : "invalid_request", "message": .string(message)])
        }
        let body = request.body.isEmpty ? JSONValue.object([]) : JSONValue.parse(request.body)
        switch (request.method, segments.first, segments.count) {
        case ("GET", "stats", 1):
            return Self.json(200, state.withLock { $0.statsJSON })
        case ("GET", "token-requests", 1):
            return Self.json(200, ["requests": .array(state.withLock { $0.tokenRequestLog.map(\.json) })])
        case ("GET", "graph-requests", 1):
            return Self.json(200, ["requests": .array(state.withLock { $0.graphRequestLog.map(\.json) })])
        case ("GET", "issued", 1):
            return Self.json(200, state.withLock { $0.issued.json })
        case ("POST", "reset", 1):
            state.withLock { $0.reset() }
            return Self.json(200, ["reset": true])
        case ("POST", "faults", 1):
            guard let body else { return bad("body must be JSON") }
            switch Fault.decode(body) {
            case .failure(let error): return bad(error.description)
            case .success(let fault):
                let pending = state.withLock { state in
                    state.faults.append(fault)
                    return state.faults.count
                }
                return Self.json(201, ["queued": .int(pending)])
            }
        case ("DELETE", "faults", 1):
            state.withLock { $0.faults = [] }
            return Self.json(200, ["queued": 0])
        case ("POST", "users", 3) where segments[2] == "adal-refresh-token":
            return mintADALRefreshToken(username: segments[1])
        case (let method, "users", 2) where method == "GET" || method == "POST":
            guard let (user, _) = configuration.directory.user(named: segments[1]) else {
                return bad("unknown user \(segments[1])", status: 404)
            }
            guard let body else { return bad("body must be JSON") }
            let key = user.username.lowercased()
            let now = clock.now()
            let controls = state.withLock { state -> UserControls in
                guard method == "POST" else { return state.controls(for: key) }
                var controls = state.controls(for: key)
                controls.apply(body)
                state.controls[key] = controls
                if body["revoke_refresh_tokens"]?.boolValue == true {
                    state.revocations[key] = (state.generation(for: key) + 1, now)
                }
                return controls
            }
            return Self.json(200, ["username": .string(user.username), "controls": controls.json])
        default:
            return bad("no control route for \(request.method) \(request.path)", status: 404)
        }
    }
}
