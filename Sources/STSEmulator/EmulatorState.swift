import Foundation

/// Everything the emulator remembers, kept behind one `Mutex` in `IdentityPlatformEmulator`.
struct EmulatorState: Sendable {
    /// What an authorization code stands for until it is redeemed.
    struct CodeGrant: Sendable {
        var clientID: String
        var redirectURI: String
        var codeChallenge: String
        var nonce: String?
        var username: String
        var tenantID: String
        var policy: String?
        var scope: String
        var clientInfo: Bool
        var claims: String?
        var issuedAt: Date
        var redeemed = false
    }

    /// One refresh token and its place in its rotation chain.
    struct RefreshTokenRecord: Sendable {
        var username: String
        var clientID: String
        var tenantID: String
        var policy: String?
        /// The user's revocation generation when issued; a later `revoke_refresh_tokens`
        /// makes the token answer AADSTS50173.
        var generation: Int
        var issuedAt: Date
        /// When a redemption replaced it, and by which token.
        var supersededAt: Date?
        var successor: String?
    }

    /// Per-user rotation counters, reported by `/_control/stats`.
    struct ChainStats: Sendable {
        var issued = 0
        var redeemed = 0
        var reusedWithinGrace = 0
        var rejectedSuperseded = 0
        var rejectedRevoked = 0

        var json: JSONValue {
            [
                "issued": .int(issued), "redeemed": .int(redeemed), "reused_within_grace": .int(reusedWithinGrace),
                "rejected_superseded": .int(rejectedSuperseded), "rejected_revoked": .int(rejectedRevoked),
            ]
        }
    }

    var codes: [String: CodeGrant] = [:]
    var refreshTokens: [String: RefreshTokenRecord] = [:]
    /// Keyed by lower-cased username.
    var controls: [String: UserControls] = [:]
    /// Lower-cased username → revocation generation and when it last changed.
    var revocations: [String: (generation: Int, at: Date)] = [:]
    var faults: [Fault] = []
    /// `jti`s of client assertions already accepted (a replay is refused).
    var clientAssertionIDs: Set<String> = []
    /// Secrets handed out (not cleared by `reset`: tests look for them after the fact).
    var issued = IssuedSecrets()

    var tokenRequests = 0
    /// The newest token requests' non-secret parameters (`GET /_control/token-requests`).
    var tokenRequestLog: [TokenRequestRecord] = []
    var tokenRequestsByGrant: [String: Int] = [:]
    var graphRequests = 0
    /// Graph requests by method (`GET`, `POST`, ...), for tests that count retries.
    var graphRequestsByMethod: [String: Int] = [:]
    /// The newest Graph requests (`GET /_control/graph-requests`), batch sub-requests included.
    var graphRequestLog: [GraphRequestRecord] = []
    /// `/v1.0/me/messages` created so far, by id, in creation order.
    var messages: [(id: String, owner: String, message: JSONValue)] = []
    /// `POST /v1.0/me/sendMail` requests accepted (202), counted in the stats as `sent_mail`.
    var sentMail: [(owner: String, message: JSONValue)] = []
    var authorizeRequests = 0
    var chains: [String: ChainStats] = [:]

    func controls(for username: String) -> UserControls { controls[username.lowercased()] ?? UserControls() }

    func generation(for username: String) -> Int { revocations[username.lowercased()]?.generation ?? 0 }

    /// Removes and returns the first fault for `endpoint` that matches `username` (a fault with
    /// `count` > 1 stays queued with one firing less).
    mutating func takeFault(for endpoint: Fault.Endpoint, username: String?) -> Fault? {
        guard
            let index = faults.firstIndex(where: { fault in
                fault.endpoint == endpoint
                    && (fault.username == nil || (username.map { fault.username!.caseInsensitiveCompare($0) == .orderedSame } ?? false))
            })
        else { return nil }
        let fault = faults[index]
        if fault.remaining <= 1 { faults.remove(at: index) } else { faults[index].remaining -= 1 }
        return fault
    }

    /// The newest token of the chain `token` belongs to.
    func head(of token: String) -> String {
        var current = token
        var steps = 0
        while let next = refreshTokens[current]?.successor, steps < 10_000 {
            current = next
            steps += 1
        }
        return current
    }

    /// Clears faults, counters and per-user settings; issued codes and tokens stay valid.
    mutating func reset() {
        faults = []
        controls = [:]
        tokenRequests = 0
        tokenRequestLog = []
        tokenRequestsByGrant = [:]
        graphRequests = 0
        graphRequestsByMethod = [:]
        graphRequestLog = []
        sentMail = []
        authorizeRequests = 0
        chains = [:]
    }

    /// Records a Graph request, dropping the oldest past ``GraphRequestRecord/capacity``.
    mutating func record(_ request: GraphRequestRecord) {
        if graphRequestLog.count >= GraphRequestRecord.capacity {
            graphRequestLog.removeFirst(graphRequestLog.count - GraphRequestRecord.capacity + 1)
        }
        graphRequestLog.append(request)
    }

    /// Records a token request, dropping the oldest past ``TokenRequestRecord/capacity``.
    mutating func record(_ request: TokenRequestRecord) {
        if tokenRequestLog.count >= TokenRequestRecord.capacity { tokenRequestLog.removeFirst(tokenRequestLog.count - TokenRequestRecord.capacity + 1) }
        tokenRequestLog.append(request)
    }

    var statsJSON: JSONValue {
        .object([
            ("token_requests", .int(tokenRequests)),
            ("token_requests_by_grant", .object(tokenRequestsByGrant.keys.sorted().map { ($0, .int(tokenRequestsByGrant[$0]!)) })),
            ("graph_requests", .int(graphRequests)),
            ("graph_requests_by_method", .object(graphRequestsByMethod.keys.sorted().map { ($0, .int(graphRequestsByMethod[$0]!)) })),
            ("sent_mail", .int(sentMail.count)),
            ("authorize_requests", .int(authorizeRequests)),
            ("refresh_token_chain", .object(chains.keys.sorted().map { ($0, chains[$0]!.json) })),
            ("pending_faults", .int(faults.reduce(0) { $0 + $1.remaining })),
        ])
    }
}
