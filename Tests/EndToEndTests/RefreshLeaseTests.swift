import Foundation
import Glibc
import PostgresBridge
import Synchronization
import Testing
import TokenRelayTesting

/// The guarantees of the refresh engine that holds nothing of PostgreSQL while the STS answers
/// (behaviour §2.6, §5, §10; ADR 0012), end to end: a lease taken over within seconds after the
/// holder is killed, kept alive by a live holder however long its call, released at SIGTERM, a
/// PostgreSQL restart in the middle of a refresh storm, the pool free while redemptions wait on
/// the STS, and the per-replica bound on redemptions in flight. The
/// single-flight storm over three replicas is ``ReplicaTests/singleFlightAcrossReplicas()``.
@Suite("Refresh leases, takeover, outages and bounds, end to end", .serialized, .timingGroup(.measuring))
struct RefreshLeaseTests {
    static let silentPath = ReplicaTests.silentPath

    // MARK: Takeover after kill -9

    @Test(
        "kill -9 of the holder mid-call (token endpoint at 6 s for the holder, 2 s for the takeover; strict rotation, 30 s grace): the other replica serves the account within 10 s, never a 500; the next forced refresh redeems the chain's head"
    )
    func takeoverAfterKill() async throws {
        // The emulator rotates a refresh token when the request arrives and answers `latency_ms`
        // later. The killed holder's redemption has therefore already superseded the stored token,
        // and the token that replaced it died with the process: whoever takes over can only present
        // the stored, superseded one, which strict rotation accepts (answering the chain's head
        // again, not forking it) only within its grace, 30 s here. The lease is the default one:
        // the takeover must come within seconds, not after the grace.
        let stack = try await TokenRelayStack(name: "e2e_lease_takeover", emulatorArguments: ["--rotation-grace-seconds", "30"])
        defer { stack.stop() }
        let holder = try await stack.startReplica()
        defer { holder.stop() }
        let user = "alice@contoso.example"
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["expires_in": 120])
        let id = try await stack.signInAccountId(user)
        // The holder's call is given 6 s, so that the kill lands inside it even when this test
        // process is slow to notice the call's arrival (in a full run on two cores it once took
        // more than 2 s, and the holder answered before it was killed); the takeover's call, 2 s.
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["expires_in": 3600, "latency_ms": 6000])
        let linksBefore = try await Self.lineage(stack, id)
        let before = try await ReplicaTests.chain(stack, user)
        let holderId = Self.replicaId(holder.log())

        // The holder is killed as soon as its redemption reaches the STS (counted on arrival).
        let doomed = Task { try? await stack.request("POST", holder.baseURL + Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]]) }
        let reached = try await ReplicaTests.within(10) {
            try await ReplicaTests.chain(stack, user)["redeemed", default: 0] == before["redeemed", default: 0] + 1
        }
        try #require(reached != nil, "the holder's redemption never reached the STS")
        await holder.killAbruptly()
        let killedAt = Date()
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["latency_ms": 2000])
        #expect(await doomed.value == nil, "the killed replica answered")
        // Killed while its call was pending: nothing stored (else this run shows nothing).
        try #require(try await Self.lineage(stack, id).count == linksBefore.count, "the holder's redemption was stored before the kill")

        // The other replica is asked at once, and again after each answer until it serves the account.
        var answers: [(status: Int, after: Double, detail: String)] = []
        var servedAfter: Double?
        while servedAfter == nil, Date().timeIntervalSince(killedAt) < 75 {
            let answer = try await stack.request("POST", Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]])
            let after = Date().timeIntervalSince(killedAt)
            // Problem details carry no secret; a 200 body does (an access token).
            answers.append((answer.status, after, answer.status == 200 ? "" : answer.text))
            if answer.status == 200 {
                servedAfter = after
                #expect(answer.json["source"] as? String == "refresh")
            } else if answer.status != 503 {
                break  // the account is dead (interaction_required) or worse: no point asking again
            }
        }
        print("lease takeover after kill -9: \(answers.map { "\($0.status) after \(String(format: "%.1f", $0.after)) s \($0.detail)" })")
        let served = try #require(servedAfter, "the account was not served again: \(answers)")
        #expect(served <= 10, "served \(served) s after the kill")
        #expect(answers.allSatisfy { [200, 503].contains($0.status) }, "\(answers)")

        // What the STS counted: the lost redemption and the takeover, which presented the token the
        // lost one superseded within the grace and was handed the chain's head again; no refusal.
        let after = try await ReplicaTests.chain(stack, user)
        let delta = after.merging(before) { $0 - $1 }
        #expect(delta["redeemed"] == 2, "\(before) → \(after)")
        #expect(delta["issued"] == 1, "\(before) → \(after)")
        #expect(delta["reused_within_grace"] == 1, "\(before) → \(after)")
        #expect(delta["rejected_superseded", default: 0] == 0, "\(before) → \(after)")
        #expect(try await Self.lease(stack, id) == nil, "the takeover left its lease held")

        // The takeover knew it was one, and named the replica that died.
        let metrics = try await stack.request("GET", "/metrics", authenticated: false).text
        #expect(ReplicaTests.sample(metrics, #"tokenrelay_refresh_claims_total{result="taken_over"}"#) == 1)
        let relayLog = stack.relay.log()
        #expect(relayLog.contains(#""event":"token.lease_taken_over""#))
        #expect(holderId != nil, "the holder logged no replica.id")
        if let holderId { #expect(relayLog.contains(#""lease.previous_holder":"\#(holderId)""#), "the takeover did not name the dead holder \(holderId)") }

        // The chain gained one link, replacing the last one.
        let linksAfter = try await Self.lineage(stack, id)
        #expect(linksAfter.count == linksBefore.count + 1, "\(linksAfter)")
        Self.expectChained(linksAfter)

        // What is stored is the head: the next redemption presents a token never superseded.
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["latency_ms": 0])
        let next = try await stack.request("POST", Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(next.status == 200, "\(next.text)")
        let last = try await ReplicaTests.chain(stack, user)
        #expect(last["redeemed"] == after["redeemed"].map { $0 + 1 })
        #expect(last["issued"] == after["issued"].map { $0 + 1 })
        #expect(last["reused_within_grace"] == after["reused_within_grace"], "the stored token was not the chain's head")
        let finalLinks = try await Self.lineage(stack, id)
        #expect(finalLinks.count == linksBefore.count + 2)
        Self.expectChained(finalLinks)
    }

    // MARK: Takeover after a database outage

    @Test(
        "PostgreSQL away while the holder's call runs (its write fails, its lease runs out), the other replica takes over once it is back (strict rotation, 1 s grace): the account stays active and the holder's rotation is redeemed next"
    )
    func takeoverAfterDatabaseOutage() async throws {
        try await PrivatePostgres.withServer { try await takeoverAfterOutage(on: $0) }
    }

    private func takeoverAfterOutage(on postgres: PrivatePostgres) async throws {
        // Strict rotation with a grace far shorter than the outage: the stored refresh token, which
        // the holder's redemption superseded, is refused by the time anyone else can present it.
        let stack = try await TokenRelayStack(name: "e2e_lease_outage", emulatorArguments: ["--rotation-grace-seconds", "1"], databaseURL: postgres.url)
        defer { stack.stop() }
        let holder = stack.relay
        let other = try await stack.startReplica()
        defer { other.stop() }
        let user = "alice@contoso.example"
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["expires_in": 120])
        let id = try await stack.signInAccountId(user)
        // The holder's call is given 6 s, so that the kill lands inside it even when this test
        // process is slow to notice the call's arrival (in a full run on two cores it once took
        // more than 2 s, and the holder answered before it was killed); the takeover's call, 2 s.
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["expires_in": 3600, "latency_ms": 6000])
        let linksBefore = try await Self.lineage(stack, id)
        let before = try await ReplicaTests.chain(stack, user)

        // PostgreSQL stops as soon as the holder's redemption reaches the STS (counted on arrival).
        let holding = Task { try? await stack.request("POST", Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]]) }
        let reached = try await ReplicaTests.within(10) {
            try await ReplicaTests.chain(stack, user)["redeemed", default: 0] == before["redeemed", default: 0] + 1
        }
        try #require(reached != nil, "the holder's redemption never reached the STS")
        try await postgres.stop()
        // The holder answers from the STS's answer and keeps the rotation in memory (its write failed).
        let held = await holding.value
        #expect(held?.status == 200, "\(held?.text ?? "no answer")")
        try #require(holder.log().contains(#""event":"token.rotation_pending""#), "the holder's write did not fail: the test proves nothing")
        // The holder reaches PostgreSQL again only after the other replica has taken its lease over
        // and been refused once: as a replica whose pool or network path recovers later would.
        // (Held by SIGSTOP; the other replica's first claim comes as soon as PostgreSQL is back.)
        holder.send(signal: SIGSTOP)
        // Past the lease (5 s, unrenewed since the stop) and the grace.
        try await Task.sleep(for: .seconds(6.5))
        try await postgres.start()
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["latency_ms": 0])
        let refusedBefore = try await ReplicaTests.chain(stack, user)["rejected_superseded", default: 0]
        let takeover = Task { try await stack.request("POST", other.baseURL + Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]]) }
        let refused = try await ReplicaTests.within(15) {
            try await ReplicaTests.chain(stack, user)["rejected_superseded", default: 0] > refusedBefore
        }
        holder.send(signal: SIGCONT)
        let answer = try await takeover.value
        #expect(refused != nil, "the takeover presented no superseded refresh token: the test proves nothing")
        // Problem details carry no secret; a 200 body does (an access token).
        #expect(answer.status == 200, "\(answer.status == 200 ? "" : answer.text)")
        #expect(answer.json["source"] as? String == "refresh")

        // The account is active: no sign-in needed.
        let account = try await stack.request("GET", "/v1/accounts/\(id)")
        #expect(account.json["state"] as? String == "active", "\(account.text)")
        let otherLog = other.log()
        #expect(otherLog.contains(#""event":"token.lease_taken_over""#))
        #expect(otherLog.contains(#""event":"token.takeover_rotation_stored""#))
        #expect(!otherLog.contains(#""event":"account.interaction_required""#))
        #expect(!holder.log().contains("token.rotation_lost"))
        let metrics = try await stack.request("GET", other.baseURL + "/metrics", authenticated: false).text
        #expect(ReplicaTests.sample(metrics, #"tokenrelay_refresh_claims_total{result="taken_over"}"#) == 1)
        #expect((ReplicaTests.sample(metrics, #"tokenrelay_refresh_total{outcome="takeover_refused"}"#) ?? 0) == 0)

        // The STS counted the holder's redemption, the takeover's refused one, and the takeover's
        // redemption of the holder's rotation (never a second use within the grace).
        let after = try await ReplicaTests.chain(stack, user)
        let delta = after.merging(before) { $0 - $1 }
        #expect(delta["redeemed"] == 2, "\(before) → \(after)")
        #expect(delta["issued"] == 2, "\(before) → \(after)")
        #expect(delta["rejected_superseded"] == 1, "\(before) → \(after)")
        #expect(delta["reused_within_grace", default: 0] == 0, "\(before) → \(after)")
        // One chain: the holder's rotation (stored when it reached PostgreSQL), then the takeover's.
        let linksAfter = try await Self.lineage(stack, id)
        #expect(linksAfter.count == linksBefore.count + 2, "\(linksAfter)")
        Self.expectChained(linksAfter)

        // What is stored is the chain's head: the next forced refresh presents a token never superseded.
        let next = try await stack.request("POST", other.baseURL + Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": true])
        #expect(next.status == 200, "\(next.status == 200 ? "" : next.text)")
        let last = try await ReplicaTests.chain(stack, user)
        #expect(last["redeemed"] == after["redeemed"].map { $0 + 1 })
        #expect(last["rejected_superseded"] == after["rejected_superseded"])
        #expect(last["reused_within_grace"] == after["reused_within_grace"], "the stored token was not the chain's head")
        Self.expectChained(try await Self.lineage(stack, id))
    }

    // MARK: A live holder keeps its lease

    @Test("A token-endpoint call longer than the lease: its holder keeps the lease alive, the other replica waits and redeems nothing")
    func leaseKeptAliveAcrossReplicas() async throws {
        let environment = ["TOKENRELAY_REFRESH_LEASE_S": "4"]
        let stack = try await TokenRelayStack(name: "e2e_lease_keep_alive", environment: environment)
        defer { stack.stop() }
        let other = try await stack.startReplica(environment: environment)
        defer { other.stop() }
        let user = "alice@contoso.example"
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["expires_in": 120])
        let id = try await stack.signInAccountId(user)
        // Twice the lease: without renewals the lease would run out under the call.
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["expires_in": 3600, "latency_ms": 8000])
        let before = try await ReplicaTests.chain(stack, user)

        let holding = Task { try await stack.request("POST", Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]]) }
        let reached = try await ReplicaTests.within(10) {
            try await ReplicaTests.chain(stack, user)["redeemed", default: 0] == before["redeemed", default: 0] + 1
        }
        try #require(reached != nil, "the holder's redemption never reached the STS")
        let waiting = try await stack.request("POST", other.baseURL + Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]])
        let held = try await holding.value
        #expect(held.status == 200, "\(held.text)")
        #expect(held.json["source"] as? String == "refresh")
        #expect(waiting.status == 200, "\(waiting.text)")
        #expect(held.json["access_token"] as? String == waiting.json["access_token"] as? String, "the waiting replica did not serve what the holder stored")

        let delta = try await ReplicaTests.chain(stack, user).merging(before) { $0 - $1 }
        #expect(delta["redeemed"] == 1, "a second redemption while the holder's call ran: \(delta)")
        let holderMetrics = try await stack.request("GET", "/metrics", authenticated: false).text
        let otherMetrics = try await stack.request("GET", other.baseURL + "/metrics", authenticated: false).text
        #expect((ReplicaTests.sample(holderMetrics, #"tokenrelay_refresh_lease_renewals_total{result="renewed"}"#) ?? 0) >= 3)
        #expect((ReplicaTests.sample(otherMetrics, #"tokenrelay_refresh_claims_total{result="taken_over"}"#) ?? 0) == 0)
        #expect((ReplicaTests.sample(otherMetrics, #"tokenrelay_refresh_claims_total{result="held_elsewhere"}"#) ?? 0) >= 1)
        #expect(try await Self.lease(stack, id) == nil)
    }

    // MARK: SIGTERM releases what it holds

    @Test("SIGTERM with a redemption still running past the drain: the lease is released before exit, the other replica serves at once")
    func shutdownReleasesLease() async throws {
        let stack = try await TokenRelayStack(name: "e2e_lease_shutdown", emulatorArguments: ["--rotation-grace-seconds", "30"])
        defer { stack.stop() }
        let draining = try await stack.startReplica(environment: ["TOKENRELAY_SHUTDOWN_TIMEOUT_S": "1"])
        defer { draining.stop() }
        let user = "alice@contoso.example"
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["expires_in": 120])
        let id = try await stack.signInAccountId(user)
        // Far longer than the drain: the redemption is given up at shutdown.
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["expires_in": 3600, "latency_ms": 30_000])
        let before = try await ReplicaTests.chain(stack, user)

        let inFlight = Task { try? await stack.request("POST", draining.baseURL + Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]]) }
        let reached = try await ReplicaTests.within(10) {
            try await ReplicaTests.chain(stack, user)["redeemed", default: 0] == before["redeemed", default: 0] + 1
        }
        try #require(reached != nil, "the redemption never reached the STS")
        #expect(try await Self.lease(stack, id) != nil)
        draining.terminate()
        let status = await draining.waitForExit()
        let exitedAt = Date()
        _ = await inFlight.value
        #expect(status == 0)
        let lease = try await Self.lease(stack, id)
        #expect(lease == nil, "the replica exited holding the lease (until \(lease.map { "\($0.expiresAt)" } ?? ""))")

        // Nothing to wait for: the other replica claims at once.
        _ = try await stack.control("POST", "/_control/users/\(user)", json: ["latency_ms": 0])
        let answer = try await stack.request("POST", Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]])
        let servedAfter = Date().timeIntervalSince(exitedAt)
        print("shutdown release: served by the other replica \(servedAfter) s after the draining one exited")
        #expect(answer.status == 200, "\(answer.text)")
        let metrics = try await stack.request("GET", "/metrics", authenticated: false).text
        #expect((ReplicaTests.sample(metrics, #"tokenrelay_refresh_claims_total{result="held_elsewhere"}"#) ?? 0) == 0, "the other replica waited for a lease")
    }

    // MARK: PostgreSQL restarted mid-storm

    @Test("PostgreSQL restarted mid-storm: never a 500, 503 with Retry-After while down, no rotation lost, the storm resumes by itself")
    func postgresRestartMidStorm() async throws {
        try await PrivatePostgres.withServer { try await restartMidStorm(on: $0) }
    }

    private func restartMidStorm(on postgres: PrivatePostgres) async throws {
        let users = (0..<20).map { "storm\($0)@contoso.example" }
        let usersFile = try ReplicaTests.usersFile(users)
        defer { try? FileManager.default.removeItem(atPath: usersFile) }
        // No rotation grace: a rotation lost in the outage makes the next redemption fail.
        let stack = try await TokenRelayStack(
            name: "e2e_storm_restart", emulatorArguments: ["--users", usersFile, "--rotation-grace-seconds", "0"], databaseURL: postgres.url)
        defer { stack.stop() }
        var ids: [String] = []
        for user in users {
            // Every token the STS issues is expired on arrival: every request redeems.
            _ = try await stack.control("POST", "/_control/users/\(user)", json: ["expires_in": 120])
            ids.append(try await stack.signInAccountId(user))
            // Long enough that every worker's redemption is at the STS when PostgreSQL stops.
            _ = try await stack.control("POST", "/_control/users/\(user)", json: ["latency_ms": 1000])
        }
        let accounts = ids

        let log = StormLog()
        let storm = Task {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        while !log.stopped {
                            let id = accounts[log.nextIndex() % accounts.count]
                            let started = Date()
                            do {
                                let answer = try await stack.request("POST", Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]])
                                log.add(.init(at: started, answer: answer))
                            } catch {
                                log.add(.init(at: started, status: 0, detail: "\(error)"))
                            }
                        }
                    }
                }
            }
        }
        let firstServed = try await ReplicaTests.within(10) { log.count(status: 200) >= 20 }
        #expect(firstServed != nil, "the storm never got going")
        try await postgres.stop()
        let downAt = Date()
        try await Task.sleep(for: .seconds(3))
        try await postgres.start()
        let upAt = Date()
        let resumed = try await ReplicaTests.within(20) { log.count(status: 200, since: upAt) >= 20 }
        try await Task.sleep(for: .seconds(1))
        log.stop()
        await storm.value
        print("storm restart: \(log.summary(downAt: downAt, upAt: upAt)); 20 answers of 200 again \(resumed ?? -1) s after the start")
        #expect(resumed != nil, "the storm did not resume by itself")
        let outcomes = log.snapshot
        #expect(outcomes.contains { $0.status == 503 && $0.at >= downAt && $0.at < upAt }, "no request saw the outage")
        let unexpected = outcomes.filter { ![200, 503].contains($0.status) }
        #expect(unexpected.isEmpty, "\(unexpected.prefix(5).map(\.description))")
        let bad503 = outcomes.filter { $0.status == 503 && ($0.retryAfter == nil || $0.error != "upstream_unavailable" || $0.retryAfterSeconds == nil) }
        #expect(bad503.isEmpty, "503 without Retry-After / retry_after_s / upstream_unavailable: \(bad503.prefix(5).map(\.description))")

        // Rotations held while the database was away are stored, and their leases released.
        let settled = try await ReplicaTests.within(10) {
            try await stack.withDatabase { connection in
                try connection.query("SELECT count(*) AS held FROM refresh_tokens WHERE lease_owner IS NOT NULL").rows.first?.int("held") == 0
            }
        }
        #expect(settled != nil, "a lease is still held after the storm (a lease that outlived its refresh)")
        // The outage caught redemptions between the STS answer and the fenced write (their
        // rotation was held in memory, then stored), and none of them was given up.
        let relayLog = stack.relay.log()
        let pending = relayLog.components(separatedBy: #""event":"token.rotation_pending""#).count - 1
        print("storm restart: \(pending) rotation(s) held in memory during the outage")
        #expect(pending >= 1, "no redemption was in flight when PostgreSQL stopped")
        #expect(!relayLog.contains("token.rotation_lost"))

        // A replica started now has no rotation pending in memory: it redeems exactly what is
        // stored, which with grace 0 works only if no rotation was lost.
        let fresh = try await stack.startReplica()
        defer { fresh.stop() }
        let finals = try await withThrowingTaskGroup(of: TestResponse.self) { group in
            for id in accounts {
                group.addTask { try await stack.request("POST", fresh.baseURL + Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]]) }
            }
            return try await group.reduce(into: [TestResponse]()) { $0.append($1) }
        }
        let failed = finals.filter { $0.status != 200 || $0.json["source"] as? String != "refresh" }
        #expect(failed.isEmpty, "\(failed.prefix(5).map(\.text))")
        let chains = (try await stack.control("GET", "/_control/stats").json["refresh_token_chain"] as? [String: [String: Int]]) ?? [:]
        #expect(chains.count == users.count)
        #expect(chains.values.reduce(0) { $0 + ($1["rejected_superseded"] ?? 0) } == 0, "a superseded refresh token was redeemed: \(chains)")
        #expect(chains.values.reduce(0) { $0 + ($1["reused_within_grace"] ?? 0) } == 0)
    }

    // MARK: The pool is free while the STS answers

    @Test("Pool of 2, ten redemptions waiting on a slow STS: account lookups and sign-ins answer in under 1 s, the pool is not held")
    func poolFreeWhileSTSAnswers() async throws {
        let users = (0..<10).map { "slow\($0)@contoso.example" } + ["probe@contoso.example"]
        let usersFile = try ReplicaTests.usersFile(users)
        defer { try? FileManager.default.removeItem(atPath: usersFile) }
        let stack = try await TokenRelayStack(
            name: "e2e_pool_free", environment: ["TOKENRELAY_DATABASE_POOL_SIZE": "2"], emulatorArguments: ["--users", usersFile])
        defer { stack.stop() }
        var ids: [String] = []
        for user in users.prefix(10) {
            _ = try await stack.control("POST", "/_control/users/\(user)", json: ["expires_in": 120])
            ids.append(try await stack.signInAccountId(user))
            _ = try await stack.control("POST", "/_control/users/\(user)", json: ["expires_in": 3600, "latency_ms": 3000])
        }
        let refreshes = ids.map { id in
            Task { try await stack.request("POST", Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]]) }
        }
        let allClaimed = try await ReplicaTests.within(10) { try await Self.leasesHeld(stack) == ids.count }
        #expect(allClaimed != nil, "the ten redemptions were not all in flight at once")

        var lookups: [Double] = []
        var signIns: [Double] = []
        var inUse: [Double] = []
        for round in 0..<3 {
            var started = Date()
            let lookup = try await stack.request("GET", "/v1/accounts?username=slow\(round)@contoso.example")
            lookups.append(Date().timeIntervalSince(started))
            #expect(lookup.status == 200, "\(lookup.text)")
            #expect((lookup.json["accounts"] as? [Any])?.count == 1, "\(lookup.text)")
            started = Date()
            let signIn = try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"], "login_hint": "probe@contoso.example"])
            signIns.append(Date().timeIntervalSince(started))
            #expect(signIn.status == 201, "\(signIn.text)")
            let metrics = try await stack.request("GET", "/metrics", authenticated: false).text
            inUse.append(ReplicaTests.sample(metrics, #"tokenrelay_db_pool_connections{state="in_use"}"#) ?? -1)
            #expect(ReplicaTests.sample(metrics, #"tokenrelay_db_pool_connections{state="size"}"#) == 2)
        }
        // The probes ran while every redemption was still waiting on the STS.
        let stillHeld = try await Self.leasesHeld(stack)
        let answers = try await withThrowingTaskGroup(of: TestResponse.self) { group in
            for refresh in refreshes { group.addTask { try await refresh.value } }
            return try await group.reduce(into: [TestResponse]()) { $0.append($1) }
        }
        print(
            "pool free: account lookups \(lookups.map { Int($0 * 1000) }) ms, sign-ins \(signIns.map { Int($0 * 1000) }) ms, "
                + "pool in use \(inUse) of 2, with \(stillHeld) of \(ids.count) redemptions in flight after the probes")
        #expect(stillHeld == ids.count, "the probes did not overlap the redemptions")
        #expect(lookups.allSatisfy { $0 < 1 }, "account lookups waited: \(lookups)")
        #expect(signIns.allSatisfy { $0 < 1 }, "sign-ins waited: \(signIns)")
        #expect(inUse.allSatisfy { $0 >= 0 && $0 < 2 }, "pool in use while the STS answers: \(inUse)")
        #expect(answers.allSatisfy { $0.status == 200 && $0.json["source"] as? String == "refresh" }, "\(answers.map(\.status))")
    }

    // MARK: The bound on redemptions in flight

    @Test("TOKENRELAY_MAX_CONCURRENT_REFRESHES=2: of six refreshes with Request-Timeout 1, four answer 503 with Retry-After at the deadline; two STS calls")
    func concurrencyBound() async throws {
        let users = (0..<6).map { "bound\($0)@contoso.example" }
        let usersFile = try ReplicaTests.usersFile(users)
        defer { try? FileManager.default.removeItem(atPath: usersFile) }
        let stack = try await TokenRelayStack(
            name: "e2e_refresh_bound", environment: ["TOKENRELAY_MAX_CONCURRENT_REFRESHES": "2"],
            emulatorArguments: ["--users", usersFile, "--rotation-grace-seconds", "0"])
        defer { stack.stop() }
        var ids: [String] = []
        for user in users {
            _ = try await stack.control("POST", "/_control/users/\(user)", json: ["expires_in": 120])
            ids.append(try await stack.signInAccountId(user))
            _ = try await stack.control("POST", "/_control/users/\(user)", json: ["expires_in": 3600, "latency_ms": 2000])
        }
        let callsBefore = try await stack.emulatorCount("token_requests")

        let peak = Mutex((inFlight: 0.0, waiting: 0.0))
        let sampler = Task {
            while !Task.isCancelled {
                if let text = try? await stack.request("GET", "/metrics", authenticated: false).text {
                    let inFlight = ReplicaTests.sample(text, "tokenrelay_refreshes_in_flight") ?? 0
                    let waiting = ReplicaTests.sample(text, "tokenrelay_refreshes_waiting") ?? 0
                    peak.withLock { $0 = (max($0.inFlight, inFlight), max($0.waiting, waiting)) }
                }
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
        let started = Date()
        let answers = try await withThrowingTaskGroup(of: (String, TestResponse, Double).self) { group in
            for id in ids {
                group.addTask {
                    let answer = try await stack.request(
                        "POST", Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]], headers: ["Request-Timeout": "1"])
                    return (id, answer, Date().timeIntervalSince(started))
                }
            }
            return try await group.reduce(into: [(String, TestResponse, Double)]()) { $0.append($1) }
        }
        // The two redemptions sent go on after their callers' deadline and store their rotation.
        let drained = try await ReplicaTests.within(10) {
            let text = try await stack.request("GET", "/metrics", authenticated: false).text
            return ReplicaTests.sample(text, "tokenrelay_refreshes_in_flight") == 0
        }
        sampler.cancel()
        _ = await sampler.value
        let calls = try await stack.emulatorCount("token_requests") - callsBefore
        let observed = peak.withLock { $0 }
        for (_, answer, elapsed) in answers {
            print("concurrency bound: \(answer.status) after \(Int(elapsed * 1000)) ms: \(answer.json["detail"] as? String ?? answer.text)")
        }
        print("concurrency bound: \(calls) STS call(s), peak \(observed.inFlight) in flight and \(observed.waiting) waiting")
        #expect(drained != nil)
        #expect(calls == 2, "STS calls beyond the bound of 2")
        #expect(observed.inFlight <= 2)

        let overBound = answers.filter { $0.1.status == 503 }
        #expect(overBound.count == 4, "\(answers.map { ($0.1.status, $0.1.json["detail"] as? String ?? "") })")
        for (_, answer, elapsed) in overBound {
            #expect(answer.json["error"] as? String == "upstream_unavailable")
            #expect((answer.json["detail"] as? String)?.contains("Too many refresh-token redemptions") == true, "\(answer.text)")
            #expect(answer.headers["Retry-After"].flatMap(Int.init) != nil)
            #expect(answer.json["retry_after_s"] as? Double != nil || answer.json["retry_after_s"] as? Int != nil)
            #expect(elapsed >= 0.8 && elapsed < 1.5, "answered \(elapsed) s after the start, the deadline was 1 s")
        }
        // The two within the bound were still waiting on the STS at the deadline: their callers
        // get 504 then, not when the STS answers (2 s), while the redemptions run on.
        let deadlinePassed = answers.filter { $0.1.status == 504 }
        #expect(deadlinePassed.count == 2)
        for (_, answer, elapsed) in deadlinePassed {
            #expect(answer.json["error"] as? String == "upstream_unavailable")
            #expect(answer.headers["Retry-After"] != nil)
            #expect(elapsed >= 0.9 && elapsed < 1.5, "answered \(elapsed) s after the start, the deadline was 1 s")
        }

        // Afterwards: the two whose redemption outlived their caller are served from what it
        // stored; the four refused redeem now (grace 0: each from the token stored at sign-in).
        for user in users { _ = try await stack.control("POST", "/_control/users/\(user)", json: ["latency_ms": 0]) }
        let callsAfterBurst = try await stack.emulatorCount("token_requests")
        for (id, first, _) in answers {
            let again = try await stack.request("POST", Self.silentPath, json: ["account_id": id, "scopes": ["User.Read"]])
            #expect(again.status == 200, "\(again.text)")
            #expect(again.json["source"] as? String == (first.status == 504 ? "cache" : "refresh"))
        }
        #expect(try await stack.emulatorCount("token_requests") - callsAfterBurst == 4)
    }

    // MARK: Helpers

    struct Link: Sendable, CustomStringConvertible {
        let generation: Int64
        let fingerprint: String
        let replaced: String?
        let cause: String
        var description: String { "\(generation):\(cause):\(replaced ?? "-")→\(fingerprint)" }
    }

    /// The account's refresh-token lineage, oldest first.
    static func lineage(_ stack: TokenRelayStack, _ accountId: String) async throws -> [Link] {
        try await stack.withDatabase { connection in
            try connection.query(
                "SELECT generation, fingerprint, replaced_fingerprint, cause FROM refresh_token_lineage WHERE account_id = $1 ORDER BY generation",
                [.text(accountId)]
            ).rows.map { row in
                Link(
                    generation: row.int("generation") ?? -1, fingerprint: row.string("fingerprint") ?? "", replaced: row.string("replaced_fingerprint"),
                    cause: row.string("cause") ?? "")
            }
        }
    }

    /// Every link after the first is a rotation of the one before it: consecutive generations,
    /// `replaced_fingerprint` = the previous `fingerprint` (no fork, no gap).
    static func expectChained(_ links: [Link], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(links.first?.cause == "sign_in", "\(links)", sourceLocation: sourceLocation)
        for (previous, link) in zip(links, links.dropFirst()) {
            #expect(link.generation == previous.generation + 1, "\(links)", sourceLocation: sourceLocation)
            #expect(link.cause == "rotation", "\(links)", sourceLocation: sourceLocation)
            #expect(link.replaced == previous.fingerprint, "\(links)", sourceLocation: sourceLocation)
            #expect(link.fingerprint != previous.fingerprint, "\(links)", sourceLocation: sourceLocation)
        }
    }

    /// The account's redemption lease when one is held: its owner and end.
    static func lease(_ stack: TokenRelayStack, _ accountId: String) async throws -> (owner: String, expiresAt: Date)? {
        try await stack.withDatabase { connection in
            guard
                let row = try connection.query(
                    "SELECT lease_owner, extract(epoch FROM lease_expires_at)::text AS expires FROM refresh_tokens WHERE account_id = $1 AND lease_owner IS NOT NULL",
                    [.text(accountId)]
                ).rows.first,
                let owner = row.string("lease_owner"), let expires = row.string("expires").flatMap(Double.init)
            else { return nil }
            return (owner, Date(timeIntervalSince1970: expires))
        }
    }

    /// The `replica.id` a replica logged when it started listening (it names its lease owners).
    static func replicaId(_ log: String) -> String? {
        guard let range = log.range(of: #""replica.id":""#) else { return nil }
        let id = log[range.upperBound...].prefix { $0 != "\"" }
        return id.isEmpty ? nil : String(id)
    }

    /// How many refresh tokens are leased now (redemptions in flight).
    static func leasesHeld(_ stack: TokenRelayStack) async throws -> Int {
        try await stack.withDatabase { connection in
            Int(
                try connection.query("SELECT count(*) AS held FROM refresh_tokens WHERE lease_owner IS NOT NULL AND lease_expires_at > now()").rows
                    .first?.int("held") ?? -1)
        }
    }
}

/// What the storm of ``RefreshLeaseTests/postgresRestartMidStorm()`` saw, with the time each
/// request was sent.
final class StormLog: Sendable {
    struct Outcome: Sendable, CustomStringConvertible {
        let at: Date
        let status: Int
        var retryAfter: String?
        var retryAfterSeconds: Double?
        var error: String?
        var detail: String

        init(at: Date, status: Int, detail: String) {
            self.at = at
            self.status = status
            self.detail = detail
        }

        init(at: Date, answer: TestResponse) {
            self.at = at
            status = answer.status
            retryAfter = answer.headers["Retry-After"]
            retryAfterSeconds = (answer.json["retry_after_s"] as? NSNumber)?.doubleValue
            error = answer.json["error"] as? String
            // Problem details carry no secret; a 200 body does (an access token).
            detail = answer.status == 200 ? "" : answer.text
        }

        var description: String { "\(status) Retry-After \(retryAfter ?? "-") \(detail)" }
    }

    private let state = Mutex((outcomes: [Outcome](), next: 0, stopped: false))

    /// Whether the storm was told to end (requests under way complete first).
    var stopped: Bool { state.withLock { $0.stopped } }

    func stop() { state.withLock { $0.stopped = true } }

    func nextIndex() -> Int {
        state.withLock { state in
            state.next += 1
            return state.next
        }
    }

    func add(_ outcome: Outcome) { state.withLock { $0.outcomes.append(outcome) } }

    var snapshot: [Outcome] { state.withLock { $0.outcomes } }

    func count(status: Int, since: Date = .distantPast) -> Int {
        state.withLock { $0.outcomes.filter { $0.status == status && $0.at >= since }.count }
    }

    func summary(downAt: Date, upAt: Date) -> String {
        let outcomes = snapshot
        func counts(_ range: Range<Date>) -> String {
            let inRange = outcomes.filter { range.contains($0.at) }
            return Dictionary(grouping: inRange, by: \.status).mapValues(\.count).sorted { $0.key < $1.key }.map { "\($0.key)×\($0.value)" }
                .joined(separator: " ")
        }
        return "before the stop \(counts(Date.distantPast..<downAt)); while down \(counts(downAt..<upAt)); after the start \(counts(upAt..<Date.distantFuture))"
    }
}
