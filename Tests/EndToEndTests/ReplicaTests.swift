import Foundation
import Glibc
import HTTPClientBridge
import PostgresBridge
import Synchronization
import Testing
import TokenRelayTesting

/// Several `token-relay serve` processes on one PostgreSQL (behaviour §8, §12 Memories and replicas),
/// single flight across replicas (§2 step 3, §10), a lost connection between the STS answer and
/// COMMIT, a database outage (§5) and graceful shutdown. Tests of several replicas reach the
/// database as production does: through pgbouncer in transaction mode, with LISTEN on a direct
/// connection (``stackBehindPgBouncer(name:poolSize:environment:emulatorArguments:)``).
@Suite("Replicas, outages and shutdown, end to end", .serialized, .timingGroup(.measuring))
struct ReplicaTests {
    static let silentPath = "/v1/tokens/silent"

    /// Polls `probe` every 50 ms until it returns true or `seconds` pass; returns the seconds it took, or nil.
    static func within(_ seconds: Double, _ probe: () async throws -> Bool) async throws -> Double? {
        let started = Date()
        while Date().timeIntervalSince(started) < seconds {
            if try await probe() { return Date().timeIntervalSince(started) }
            try await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    /// Waits until a redemption is in flight (some refresh token's lease is held, i.e. a refresh
    /// is waiting for the STS) and checks that nothing of PostgreSQL is held meanwhile (ADR 0012):
    /// no session of the relay is inside a transaction and no advisory lock is granted.
    /// - Returns: true when a redemption was seen in flight within 10 s.
    static func redemptionInFlight(_ stack: TokenRelayStack) async throws -> Bool {
        let seen = try await within(10) {
            try await stack.withDatabase { connection in
                try connection.query("SELECT 1 FROM refresh_tokens WHERE lease_owner IS NOT NULL AND lease_expires_at > now()").rows.first != nil
            }
        }
        guard seen != nil else { return false }
        let held = try await stack.withDatabase { connection in
            try connection.query(
                """
                SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
                          AND state IN ('idle in transaction', 'idle in transaction (aborted)', 'active') AND query NOT ILIKE '%LISTEN%') AS busy,
                       (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
                          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())) AS advisory
                """
            ).rows.first
        }
        #expect(held?.int("busy") == 0, "a relay session is inside a transaction while the STS answers")
        #expect(held?.int("advisory") == 0, "an advisory lock is held while the STS answers")
        return true
    }

    static func cli(_ arguments: [String], databaseURL: String) async throws -> (Int32, String) {
        let environment = ["TOKENRELAY_DATABASE_URL": databaseURL, "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin"]
        let run = try await BuiltProducts.run("token-relay", arguments, environment: environment)
        return (run.status, run.output)
    }

    /// A stack on a fresh database that its replicas reach through a pgbouncer of its own in
    /// transaction mode (`TOKENRELAY_DATABASE_URL`, also ``TokenRelayStack/databaseURL`` for CLI
    /// runs), LISTENing on a direct connection (`TOKENRELAY_DATABASE_LISTEN_URL`), as behaviour §8
    /// describes production. Stop the stack (and its replicas) before the pgbouncer.
    static func stackBehindPgBouncer(
        name: String, poolSize: Int = 5, environment: [String: String] = [:], emulatorArguments: [String] = []
    ) async throws -> (TokenRelayStack, PgBouncer) {
        let direct = try await TestPostgres.freshDatabase(named: name)
        let bouncer = try await PgBouncer(databaseURL: direct, poolSize: poolSize)
        do {
            let stack = try await TokenRelayStack(
                name: name, environment: ["TOKENRELAY_DATABASE_LISTEN_URL": direct].merging(environment) { $1 },
                emulatorArguments: emulatorArguments, databaseURL: bouncer.url)
            return (stack, bouncer)
        } catch {
            bouncer.stop()
            throw error
        }
    }

    @Test("A key revoked by the CLI, a claims refresh and an account deleted on one replica reach another within 2 s")
    func invalidationReachesOtherReplica() async throws {
        // A TTL far above the bound: only a notification can explain an answer within 2 s.
        let (stack, bouncer) = try await Self.stackBehindPgBouncer(name: "e2e_invalidate", environment: ["TOKENRELAY_CACHE_TTL_S": "600"])
        defer { bouncer.stop() }
        defer { stack.stop() }
        let other = try await stack.startReplica()
        defer { other.stop() }
        let (status, output) = try await Self.cli(
            ["api-keys", "create", "--name", "replica", "--permissions", "tokens:acquire,accounts:read"], databaseURL: stack.databaseURL)
        #expect(status == 0)
        let created = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        let key = try #require(created["api_key"] as? String)
        let keyId = try #require(created["key_id"] as? String)
        try await StackHelpers.awaitKnown(key, on: [stack.baseURL, other.baseURL], stack)
        let id = try await stack.signInAccountId("alice@contoso.example")

        // The other replica learns the key and the account (both now in its memory).
        let withKey = ["Authorization": "Bearer \(key)"]
        let first = try await stack.request("POST", other.baseURL + Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]], headers: withKey)
        #expect(first.status == 200, "\(first.text)")
        #expect(first.json["source"] as? String == "cache")

        // A token refreshed with claims on one replica replaces what the other serves from memory.
        let claims = #"{"access_token":{"nbf":{"essential":true,"value":"1700000000"}}}"#
        let challenged = try await stack.request("POST", Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"], "claims": claims])
        #expect(challenged.status == 200, "\(challenged.text)")
        #expect(challenged.json["source"] as? String == "refresh")
        let newToken = try #require(challenged.json["access_token"] as? String)
        #expect(newToken != first.json["access_token"] as? String)
        let replacedAfter = try await Self.within(2) {
            let answer = try await stack.request("POST", other.baseURL + Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]])
            return answer.json["access_token"] as? String == newToken
        }
        #expect(replacedAfter != nil, "the other replica still serves the token the claims challenge replaced")

        #expect(try await Self.cli(["api-keys", "revoke", keyId], databaseURL: stack.databaseURL).0 == 0)
        let keyRefusedAfter = try await Self.within(2) {
            try await stack.request("GET", other.baseURL + "/v1/accounts/\(id)", headers: withKey).status == 401
        }
        #expect(keyRefusedAfter != nil, "the other replica still accepts the revoked key")

        let deleted = try await stack.request("DELETE", "/v1/accounts/\(id)")
        #expect(deleted.status == 204)
        let goneAfter = try await Self.within(2) {
            try await stack.request("POST", other.baseURL + Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]]).status == 404
        }
        #expect(goneAfter != nil, "the other replica still serves the deleted account")
        print(
            "invalidation: claims token after \(replacedAfter ?? -1) s, key refused after \(keyRefusedAfter ?? -1) s, account gone after \(goneAfter ?? -1) s")

        let metrics = try await stack.request("GET", other.baseURL + "/metrics", authenticated: false).text
        #expect(metrics.contains(#"tokenrelay_invalidations_received_total{kind="api_key.revoked"} 1"#))
        #expect(metrics.contains(#"tokenrelay_invalidations_received_total{kind="account.deleted"} 1"#))
        #expect(metrics.contains(#"tokenrelay_invalidations_received_total{kind="tokens.replaced"} 1"#))
        #expect(metrics.contains("tokenrelay_invalidation_listening 1"))
    }

    @Test("A key answered from the verified-key memo is refused on every replica within 2 s of its revocation; its secret is in no metric or row")
    func revokedKeyLeavesTheMemo() async throws {
        // A TTL far above the bound: only the revocation's notification can drop the memo in time.
        let (stack, bouncer) = try await Self.stackBehindPgBouncer(name: "e2e_key_memo", environment: ["TOKENRELAY_CACHE_TTL_S": "600"])
        defer { bouncer.stop() }
        defer { stack.stop() }
        let other = try await stack.startReplica()
        defer { other.stop() }
        let (status, output) = try await Self.cli(["api-keys", "create", "--name", "memo", "--permissions", "tokens:acquire"], databaseURL: stack.databaseURL)
        #expect(status == 0)
        let created = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        let key = try #require(created["api_key"] as? String)
        let keyId = try #require(created["key_id"] as? String)
        let secret = String(key.dropFirst("trk_\(keyId)_".count))
        let replicas = [stack.baseURL, other.baseURL]
        try await StackHelpers.awaitKnown(key, on: replicas, stack)
        let id = try await stack.signInAccountId("alice@contoso.example")
        let body: [String: Any] = ["account_id": id, "scopes": ["User.Read"]]
        let withKey = ["Authorization": "Bearer \(key)"]

        // On each replica: the first use reads the key's row, the second verifies the secret
        // against its hash and memoises it, the rest are answered from the memo.
        for replica in replicas {
            for _ in 0..<4 {
                let answer = try await stack.request("POST", replica + Self.silentPath, json: body, headers: withKey)
                #expect(answer.status == 200, "\(answer.text)")
            }
        }

        #expect(try await Self.cli(["api-keys", "revoke", keyId], databaseURL: stack.databaseURL).0 == 0)
        for replica in replicas {
            let refusedAfter = try await Self.within(2) {
                try await stack.request("POST", replica + Self.silentPath, json: body, headers: withKey).status == 401
            }
            #expect(refusedAfter != nil, "\(replica) still answers the revoked key from its memo")
            // And stays refused: nothing of the memo comes back.
            #expect(try await stack.request("POST", replica + Self.silentPath, json: body, headers: withKey).status == 401)
        }

        for replica in replicas {
            let metrics = try await stack.request("GET", replica + "/metrics", authenticated: false).text
            #expect(!metrics.contains(secret), "the presented secret is in \(replica)'s metrics")
        }
        // Every row of every table, as text: the database holds the secret's hash, never the secret.
        let rowsHolding = try await stack.withDatabase { connection in
            let tables = try connection.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'")
                .rows.compactMap { $0.string("table_name") }
            var holding: [String] = []
            for table in tables {
                let sql = "SELECT count(*) AS n FROM \"\(table)\" AS row WHERE strpos(row::text, $1) > 0"
                let found = try connection.query(sql, [.text(secret)]).rows.first?.int("n") ?? 0
                if found > 0 { holding.append(table) }
            }
            return (tables.count, holding)
        }
        #expect(rowsHolding.0 > 10, "the scan read the relay's tables")
        #expect(rowsHolding.1.isEmpty, "the presented secret is stored in \(rowsHolding.1)")
    }

    @Test("Without notifications, the cache TTL bounds staleness: a revoked key and a deleted account are refused within it")
    func ttlFallback() async throws {
        let (stack, bouncer) = try await Self.stackBehindPgBouncer(name: "e2e_ttl_fallback")
        defer { bouncer.stop() }
        defer { stack.stop() }
        // This replica never hears a notification: only TOKENRELAY_CACHE_TTL_S can bring it news.
        let deaf = try await stack.startReplica(environment: [
            "TOKENRELAY_DATABASE_LISTEN_URL": "postgresql://nobody@/none?host=/nonexistent", "TOKENRELAY_CACHE_TTL_S": "5",
        ])
        defer { deaf.stop() }
        let (_, output) = try await Self.cli(["api-keys", "create", "--name", "ttl", "--permissions", "tokens:acquire"], databaseURL: stack.databaseURL)
        let created = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        let key = try #require(created["api_key"] as? String)
        let id = try await stack.signInAccountId("alice@contoso.example")
        let withKey = ["Authorization": "Bearer \(key)"]
        let body: [String: Any] = ["account_id": id, "scopes": ["User.Read"]]
        #expect(try await stack.request("POST", deaf.baseURL + Self.silentPath, json: body, headers: withKey).status == 200)

        #expect(try await Self.cli(["api-keys", "revoke", try #require(created["key_id"] as? String)], databaseURL: stack.databaseURL).0 == 0)
        #expect(try await stack.request("DELETE", "/v1/accounts/\(id)").status == 204)
        // Still remembered at first (this is what notifications fix) ...
        #expect(try await stack.request("POST", deaf.baseURL + Self.silentPath, json: body, headers: withKey).status == 200)
        // ... and forgotten once the TTL has passed.
        let keyRefused = try await Self.within(15) {
            try await stack.request("POST", deaf.baseURL + Self.silentPath, json: body, headers: withKey).status == 401
        }
        let accountGone = try await Self.within(15) {
            try await stack.request("POST", deaf.baseURL + Self.silentPath, json: body).status == 404
        }
        #expect(keyRefused != nil)
        #expect(accountGone != nil)
        print("ttl fallback (TTL 5 s): key refused \(keyRefused ?? -1) s and account gone \(accountGone ?? -1) s after the last poll began")
    }

    @Test("1,000 concurrent requests for an expired token over three replicas through pgbouncer: exactly one STS call, one new lineage link")
    func singleFlightAcrossReplicas() async throws {
        Self.raiseOpenFileLimit()
        // No rotation grace: a request that used a superseded refresh token would fail.
        let replicas = try await ThreeReplicas.start(name: "e2e_single_flight", emulatorArguments: ["--rotation-grace-seconds", "0"])
        defer { replicas.stop() }
        let stack = replicas.stack
        let user = "bob@contoso.example"
        // expires_in ≤ expiry skew: the sign-in's token is expired on arrival.
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["expires_in": 120])
        let id = try await stack.signInAccountId(user)
        // The STS answers after 1 s, so all 1,000 requests arrive while the refresh is running.
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["expires_in": 3600, "latency_ms": 1000])
        let before = try await Self.chain(stack, user)
        let linksBefore = try await RefreshLeaseTests.lineage(stack, id)
        let callsBefore = try await stack.emulatorCount("token_requests")

        let bases = replicas.bases
        let started = Date()
        let statuses = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
            for index in 0..<1_000 {
                group.addTask {
                    let answer = try await stack.request(
                        "POST", bases[index % 3] + Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]])
                    return (answer.status, (answer.json["access_token"] as? String)?.isEmpty == false)
                }
            }
            return try await group.reduce(into: [(Int, Bool)]()) { $0.append($1) }
        }
        let elapsed = Date().timeIntervalSince(started)
        let calls = try await stack.emulatorCount("token_requests") - callsBefore
        let after = try await Self.chain(stack, user)
        print("single flight: 1000 requests over 3 replicas in \(elapsed) s, \(calls) STS call(s), chain \(after)")
        #expect(statuses.count == 1_000)
        #expect(statuses.allSatisfy { $0.0 == 200 && $0.1 }, "statuses: \(Set(statuses.map(\.0)))")
        // One lease for all three replicas: the two that did not get it wait for its release and
        // find the new token stored (ADR 0012).
        #expect(calls == 1)
        #expect(after["redeemed", default: 0] - before["redeemed", default: 0] == 1)
        #expect(after["issued", default: 0] - before["issued", default: 0] == 1)
        // One chain: no redemption presented a refresh token already rotated away.
        #expect(after["rejected_superseded", default: 0] == before["rejected_superseded", default: 0])
        #expect(after["reused_within_grace", default: 0] == before["reused_within_grace", default: 0])

        var stsSuccesses = 0.0
        var coalesced = 0.0
        var claims = 0.0
        var rotations = 0.0
        for base in bases {
            let text = try await stack.request("GET", base + "/metrics", authenticated: false).text
            coalesced += Self.sample(text, "tokenrelay_refresh_coalesced_total") ?? 0
            stsSuccesses += Self.sample(text, #"tokenrelay_sts_requests_total{grant="refresh_token",outcome="success"}"#) ?? 0
            claims += Self.sample(text, #"tokenrelay_refresh_claims_total{result="claimed"}"#) ?? 0
            rotations += Self.sample(text, #"tokenrelay_refresh_total{outcome="rotated"}"#) ?? 0
            #expect(text.contains(#"tokenrelay_db_pool_connections{state="size"} 4"#))
            #expect(text.contains("tokenrelay_db_pool_waits "))
        }
        // Requests joined their replica's refresh; replicas took the lease once per STS call (the
        // others waited and found the new token stored).
        #expect(coalesced >= 1)
        #expect(Int(stsSuccesses) == calls)
        #expect(Int(claims) == calls)
        #expect(Int(rotations) == calls)
        print("single flight: \(Int(coalesced)) requests coalesced, \(Int(claims)) lease claims")

        // The lineage gained exactly one link, the rotation of the sign-in's token.
        let links = try await RefreshLeaseTests.lineage(stack, id)
        #expect(links.count == linksBefore.count + 1, "\(linksBefore) → \(links)")
        #expect(links.last?.replaced == linksBefore.last?.fingerprint, "\(linksBefore) → \(links)")
        RefreshLeaseTests.expectChained(links)
        // What is stored is the chain's head: with grace 0 the next redemption works only then.
        let next = try await stack.request(
            "POST", replicas.third.baseURL + Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true],
            headers: ["Request-Timeout": "10"])
        #expect(next.status == 200, "\(next.text)")
        #expect(try await Self.chain(stack, user)["rejected_superseded", default: 0] == before["rejected_superseded", default: 0])
    }

    @Test("pgbouncer, 4 server connections for 3 replicas × 8: a burst of sign-ins, refreshes and listings, no 500; a deletion reaches another replica in 2 s")
    func burstThroughPgBouncer() async throws {
        // 15 users in the stack's tenant: 9 signed in first, 6 during the burst.
        let usersFile = try Self.usersFile((0..<9).map { "user\($0)@contoso.example" } + (0..<6).map { "new\($0)@contoso.example" })
        defer { try? FileManager.default.removeItem(atPath: usersFile) }
        // 24 client connections over 4 server connections: transaction pooling must multiplex.
        // A TTL far above the bound: only a notification can explain the 404 within 2 s.
        let replicas = try await ThreeReplicas.start(
            name: "e2e_pgbouncer", poolSize: 4, environment: ["TOKENRELAY_DATABASE_POOL_SIZE": "8", "TOKENRELAY_CACHE_TTL_S": "600"],
            emulatorArguments: ["--users", usersFile])
        defer { replicas.stop() }
        let (stack, bouncer, second) = (replicas.stack, replicas.bouncer, replicas.second)
        let bases = replicas.bases
        var accounts: [String] = []
        for index in 0..<9 {
            accounts.append(try await stack.signInAccountId("user\(index)@contoso.example", on: bases[index % 3]))
        }
        let before = try await bouncer.counters("STATS")

        // Per account a forced refresh (an STS call and the refresh transaction) on one replica,
        // a silent request on the next and a listing on the third; and new sign-ins on each.
        let started = Date()
        let outcomes = await withTaskGroup(of: BurstOutcome.self) { group in
            for (index, id) in accounts.enumerated() {
                group.addTask {
                    await BurstOutcome("forced refresh") {
                        try await stack.request(
                            "POST", bases[index % 3] + Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
                    }
                }
                group.addTask {
                    await BurstOutcome("silent") {
                        try await stack.request("POST", bases[(index + 1) % 3] + Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]])
                    }
                }
                group.addTask {
                    await BurstOutcome("listing") { try await stack.request("GET", bases[(index + 2) % 3] + "/v1/accounts") }
                }
            }
            for index in 0..<6 {
                group.addTask {
                    await BurstOutcome("sign-in") {
                        _ = try await stack.signInAccountId("new\(index)@contoso.example", on: bases[index % 3])
                        return nil
                    }
                }
            }
            return await group.reduce(into: [BurstOutcome]()) { $0.append($1) }
        }
        let elapsed = Date().timeIntervalSince(started)
        #expect(outcomes.count == accounts.count * 3 + 6)
        let failed = outcomes.filter { $0.status != 200 }
        #expect(failed.isEmpty, "\(failed.map(\.description))")
        #expect(outcomes.filter { $0.kind == "forced refresh" }.allSatisfy { $0.source == "refresh" }, "\(outcomes.map(\.description))")

        // The traffic went through pgbouncer, over at most its 4 server connections, for more clients.
        let stats = try await bouncer.counters("STATS")
        let transactions = stats["total_xact_count", default: 0] - before["total_xact_count", default: 0]
        let waited = Double(stats["total_wait_time", default: 0] - before["total_wait_time", default: 0]) / 1e6
        let pools = try await bouncer.counters("POOLS")
        let serverConnections = ["sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"].reduce(0) { $0 + pools[$1, default: 0] }
        let clients = try await bouncer.show("CLIENTS").filter { $0["database"] == bouncer.database }.count
        print(
            "pgbouncer burst: \(outcomes.count) requests over 3 replicas in \(elapsed) s; \(transactions) transactions through pgbouncer, "
                + "\(clients) client connections on \(serverConnections) server connections, "
                + "clients waited \(waited) s for one in all")
        #expect(transactions >= accounts.count * 2 + 6, "every forced refresh, listing and sign-in runs at least one transaction")
        #expect(serverConnections >= 1 && serverConnections <= 4)
        #expect(clients > serverConnections, "the replicas' connections were not multiplexed")

        // Cross-replica invalidation still flows (NOTIFY through pgbouncer, LISTEN direct).
        let victim = accounts[0]
        let remembered = try await stack.request("POST", second.baseURL + Self.silentPath, json: ["account_id": victim, "scopes": ["User.Read"]])
        #expect(remembered.status == 200, "\(remembered.text)")
        #expect(remembered.json["source"] as? String == "cache")
        #expect(try await stack.request("DELETE", stack.baseURL + "/v1/accounts/\(victim)").status == 204)
        let goneAfter = try await Self.within(2) {
            try await stack.request("POST", second.baseURL + Self.silentPath, json: ["account_id": victim, "scopes": ["User.Read"]]).status == 404
        }
        #expect(goneAfter != nil, "the other replica still serves the account deleted through pgbouncer")
        for base in bases {
            #expect(try await stack.request("GET", base + "/metrics", authenticated: false).text.contains("tokenrelay_invalidation_listening 1"))
        }
        print("pgbouncer burst: account deleted on one replica gone on another after \(goneAfter ?? -1) s")
    }

    @Test("Every relay connection killed while the STS answers: the rotated refresh token is still stored")
    func lostConnectionBeforeCommit() async throws {
        let stack = try await TokenRelayStack(name: "e2e_lost_commit", emulatorArguments: ["--rotation-grace-seconds", "0"])
        defer { stack.stop() }
        let user = "alice@contoso.example"
        let id = try await stack.signInAccountId(user)
        // A wide window: on a loaded machine finding and killing the backend takes a while, and
        // the kill must land before the STS answers and the refresh commits.
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["latency_ms": 5000])
        let inFlight = Task {
            try await stack.request("POST", Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        }
        // The refresh holds nothing while the STS answers slowly: kill every connection the
        // relay has, so the fenced write after the STS answer meets a dead one.
        #expect(try await Self.redemptionInFlight(stack))
        let terminated = try await stack.withDatabase { connection in
            try connection.query(TestPostgres.terminateOtherSessions).rows.first?.int("terminated")
        }
        #expect((terminated ?? 0) >= 1)
        let answer = try await inFlight.value
        #expect(answer.status == 200, "\(answer.text)")

        // With no rotation grace, this works only if the rotated refresh token was stored.
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["latency_ms": 0])
        let next = try await stack.request("POST", Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(next.status == 200, "\(next.text)")
        #expect(next.json["source"] as? String == "refresh")
    }

    @Test("The database goes away between the STS answer and COMMIT: the caller gets its token, the rotation is stored when it returns")
    func outageBeforeCommit() async throws {
        try await PrivatePostgres.withServer { try await outageBeforeCommit(on: $0) }
    }

    private func outageBeforeCommit(on postgres: PrivatePostgres) async throws {
        // No rotation grace: redeeming the superseded token afterwards would fail.
        let stack = try await TokenRelayStack(name: "e2e_outage_commit", emulatorArguments: ["--rotation-grace-seconds", "0"], databaseURL: postgres.url)
        defer { stack.stop() }
        let user = "alice@contoso.example"
        let id = try await stack.signInAccountId(user)
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["latency_ms": 1500])
        let inFlight = Task {
            try await stack.request("POST", Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        }
        #expect(try await Self.redemptionInFlight(stack))
        try await postgres.stop()
        let answer = try await inFlight.value
        #expect(answer.status == 200, "\(answer.text)")
        #expect(stack.relay.log().contains("token.rotation_pending"))

        try await postgres.start()
        let stored = try await Self.within(10) { stack.relay.log().contains("token.rotation_stored_on_retry") }
        #expect(stored != nil, "the held rotation was not stored after the database returned")
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["latency_ms": 0])
        let next = try await stack.request("POST", Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(next.status == 200, "\(next.text)")
        #expect(next.json["source"] as? String == "refresh")
    }

    @Test("Database down under load: readiness 503, 503 with Retry-After and never 500, memory hits served; recovery without restart")
    func databaseOutage() async throws {
        try await PrivatePostgres.withServer { try await outage(on: $0) }
    }

    private func outage(on postgres: PrivatePostgres) async throws {
        let stack = try await TokenRelayStack(name: "e2e_outage", databaseURL: postgres.url)
        defer { stack.stop() }
        let id = try await stack.signInAccountId("alice@contoso.example")
        let cached = try await stack.request("POST", Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]])
        #expect(cached.status == 200)

        // Load: memory hits, database reads (another account) and refreshes, all the time.
        let outcomes = OutcomeLog()
        let load = Task {
            while !Task.isCancelled {
                await withTaskGroup(of: Void.self) { group in
                    for (account, force) in [(id, false), ("acc_unknown", false), (id, true)] {
                        group.addTask {
                            let body: [String: Any] = ["account_id": account, "scopes": ["User.Read"], "force_refresh": force]
                            guard let answer = try? await stack.request("POST", Self.silentPath, json: body) else { return }
                            outcomes.add(status: answer.status, retryAfter: answer.headers["Retry-After"], error: answer.json["error"] as? String)
                        }
                    }
                }
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        try await postgres.stop()
        let downAt = Date()
        let ready = try #require(
            try await Self.within(5) {
                try await stack.request("GET", "/readyz", authenticated: false).status == 503
            })
        let readiness = try await stack.request("GET", "/readyz", authenticated: false)
        #expect(readiness.headers["Content-Type"] == "application/health+json")
        #expect(readiness.json["status"] as? String == "fail")
        let check = ((readiness.json["checks"] as? [String: Any])?["postgresql:responseTime"] as? [[String: Any]])?.first
        #expect(check?["status"] as? String == "fail")
        // A key this replica has not seen needs the database: 503, not 401 and not 500.
        let unknownKey = try await stack.request(
            "GET", "/v1/accounts", headers: ["Authorization": "Bearer trk_abcdefgh1_c2VjcmV0"], authenticated: false)
        #expect(unknownKey.status == 503, "\(unknownKey.text)")
        #expect(unknownKey.headers["Retry-After"] != nil)
        let listing = try await stack.request("GET", "/v1/accounts")
        #expect(listing.status == 503)
        #expect(listing.json["error"] as? String == "upstream_unavailable")
        let metricsDown = try await stack.request("GET", "/metrics", authenticated: false).text
        #expect(metricsDown.contains("tokenrelay_ready 0"))
        #expect(metricsDown.contains("tokenrelay_invalidation_listening 0"))
        try await Task.sleep(for: .seconds(1.5))
        let memoryHit = try await stack.request("POST", Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]])
        #expect(memoryHit.status == 200, "a token in memory is served while the database is down")

        try await postgres.start()
        let upAt = Date()
        let recovered = try await Self.within(15) {
            try await stack.request("POST", Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true]).status == 200
        }
        load.cancel()
        _ = await load.result
        #expect(recovered != nil, "the service did not recover without a restart")
        #expect(try await stack.request("GET", "/readyz", authenticated: false).status == 200)
        #expect(try await stack.request("GET", "/metrics", authenticated: false).text.contains("tokenrelay_ready 1"))
        let account = try await stack.request("GET", "/v1/accounts/\(id)")
        #expect(account.status == 200)
        print(
            "outage: readiness 503 after \(ready) s, recovered \(recovered ?? -1) s after start (\(Date().timeIntervalSince(downAt)) s total); "
                + "\(outcomes.summary) since \(upAt)")

        let seen = outcomes.snapshot
        #expect(seen.statuses.contains(503), "no request saw the outage")
        #expect(!seen.statuses.contains(500), "\(outcomes.summary)")
        #expect(Set(seen.statuses).isSubset(of: [200, 404, 503]), "\(outcomes.summary)")
        #expect(seen.unavailableWithoutRetryAfter == 0)
        #expect(seen.unavailableErrors.isSubset(of: ["upstream_unavailable"]))
    }

    @Test("SIGTERM: new connections are refused, the request in flight completes, exit 0")
    func gracefulShutdown() async throws {
        let stack = try await TokenRelayStack(name: "e2e_shutdown")
        defer { stack.stop() }
        let user = "alice@contoso.example"
        let id = try await stack.signInAccountId(user)
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["latency_ms": 3000])
        let inFlight = Task {
            try await stack.request("POST", Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        }
        #expect(try await Self.redemptionInFlight(stack))
        stack.relay.terminate()
        let refusedAfter = try await Self.within(2) {
            // A client per try: a kept-alive connection made before SIGTERM would still be served.
            let fresh = HTTPClient()
            defer { fresh.shutdown() }
            do {
                _ = try await fresh.execute(HTTPClientRequest(method: "GET", url: stack.baseURL + "/healthz", timeout: 1))
                return false
            } catch {
                return true
            }
        }
        #expect(refusedAfter != nil, "new connections were still accepted after SIGTERM")
        let answer = try await inFlight.value
        #expect(answer.status == 200, "\(answer.text)")
        let status = await stack.relay.waitForExit()
        #expect(status == 0)
        #expect(stack.relay.log().contains(#""drained":"true""#))
    }

    // MARK: Helpers

    /// Writes an emulator users file (`--users`) with `usernames` in the stack's tenant
    /// (`contoso.example`) and returns its path; the caller removes it.
    static func usersFile(_ usernames: [String]) throws -> String {
        let users = usernames.enumerated().map { index, name in
            ["username": name, "oid": String(format: "aaaaaaaa-0000-4000-8000-%012ld", index)]
        }
        let directory = ["tenants": [["id": "11111111-1111-1111-1111-111111111111", "domains": ["contoso.example"], "users": users]]]
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tokenrelay-users-\(UUID().uuidString.prefix(8)).json")
        try JSONSerialization.data(withJSONObject: directory).write(to: file)
        return file.path
    }

    /// The emulator's rotation counters for `user`.
    static func chain(_ stack: TokenRelayStack, _ user: String) async throws -> [String: Int] {
        let stats = try await stack.control("GET", "/_control/stats").json
        return ((stats["refresh_token_chain"] as? [String: Any])?[user.lowercased()] as? [String: Int]) ?? [:]
    }

    /// The value of an unlabelled sample in Prometheus text, or nil.
    static func sample(_ text: String, _ name: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.dropFirst(name.count + 1))
        }
        return nil
    }

    /// 1,000 connections on each side need more descriptors than some shells allow (PLATFORM-NOTES).
    static func raiseOpenFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < 8192 else { return }
        limit.rlim_cur = min(limit.rlim_max, 65536)
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}

/// What the load saw during the outage test.
final class OutcomeLog: Sendable {
    struct Snapshot: Sendable {
        var statuses: [Int] = []
        var unavailableWithoutRetryAfter = 0
        var unavailableErrors: Set<String> = []
    }

    private let state = Mutex(Snapshot())

    func add(status: Int, retryAfter: String?, error: String?) {
        state.withLock { state in
            state.statuses.append(status)
            if status == 503 {
                if retryAfter.flatMap(Int.init) == nil { state.unavailableWithoutRetryAfter += 1 }
                state.unavailableErrors.insert(error ?? "none")
            }
        }
    }

    var snapshot: Snapshot { state.withLock { $0 } }

    var summary: String {
        let snapshot = self.snapshot
        let counts = Dictionary(grouping: snapshot.statuses, by: { $0 }).mapValues(\.count)
        return "statuses \(counts.sorted { $0.key < $1.key }), 503 without Retry-After: \(snapshot.unavailableWithoutRetryAfter)"
    }
}
