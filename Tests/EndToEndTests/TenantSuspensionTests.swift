import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// Customer tenants under control (behaviour §12 Tenants; issue 12 part 2): `POST
/// /v1/tenants/{tenant_id}/suspend|resume`, `GET /v1/tenants` and `token-relay tenants`, on the
/// real binaries, PostgreSQL and the emulator.
@Suite("Tenant suspension, end to end", .serialized)
struct TenantSuspensionTests {
    static let contoso = "11111111-1111-1111-1111-111111111111"
    static let fabrikam = StackHelpers.fabrikam
    static let unseen = "33333333-3333-3333-3333-333333333333"
    static let graphDefault = AppAndOnBehalfOfTests.graphDefault

    static func silent(_ stack: TokenRelayStack, _ accountId: String, on base: String? = nil, force: Bool = false) async throws -> TestResponse {
        try await stack.request(
            "POST", (base ?? stack.baseURL) + "/v1/tokens/silent", json: ["account_id": accountId, "scopes": ["User.Read"], "force_refresh": force])
    }

    static func expectSuspended(_ answer: TestResponse, _ tenant: String, _ what: String) {
        #expect(answer.status == 403, "\(what): \(answer.text)")
        #expect(answer.json["error"] as? String == "tenant_suspended", "\(what): \(answer.text)")
        #expect(answer.json["tenant_id"] as? String == tenant, "\(what): \(answer.text)")
    }

    /// The refresh token row's (generation, nonce): the same pair means the token was not touched.
    static func refreshTokenRow(_ stack: TokenRelayStack, _ accountId: String) async throws -> (Int64, [UInt8])? {
        try await stack.withDatabase { connection in
            try connection.query("SELECT generation, nonce FROM refresh_tokens WHERE account_id = $1", [.text(accountId)]).rows.first.map {
                ($0.int("generation") ?? -1, $0.bytes("nonce") ?? [])
            }
        }
    }

    @Test("Suspended: every token and downstream route is 403 tenant_suspended, no STS call; resume serves the same refresh token again")
    func suspendRefusesEveryRouteAndResumeRestores() async throws {
        let stack = try await TokenRelayStack(name: "e2e_tenant_suspend")
        defer { stack.stop() }
        // The OBO assertion signs alice in (her account in contoso), then carol in fabrikam.
        let assertion = try await AppAndOnBehalfOfTests.incomingUserToken(stack)
        let alice = try await stack.signInAccountId("alice@contoso.example")
        let carol = try await StackHelpers.signIn(
            stack, "carol@fabrikam.example", authority: "\(stack.emulator.baseURL)/\(Self.fabrikam)", scopes: ["User.Read"])
        let carolId = try #require(carol["account_id"] as? String)
        // Warm every cache: the account's token, the app token and the OBO token.
        #expect(try await Self.silent(stack, alice).status == 200)
        #expect(try await Self.silent(stack, alice).json["source"] as? String == "cache")
        #expect(try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault]]).status == 200)
        #expect(try await stack.request("POST", "/v1/tokens/on-behalf-of", json: ["assertion": assertion, "scopes": ["User.Read"]]).status == 200)
        let rowBefore = try #require(try await Self.refreshTokenRow(stack, alice))
        let stsCalls = try await stack.emulatorCount()

        // Upper case in the path: tenants match case-insensitively.
        let suspended = try await stack.request("POST", "/v1/tenants/\(Self.contoso.uppercased())/suspend")
        #expect(suspended.status == 200, "\(suspended.text)")
        #expect(suspended.json["tenant_id"] as? String == Self.contoso)
        #expect(suspended.json["suspended"] as? Bool == true)
        #expect(suspended.json["suspended_by"] is String)
        #expect((suspended.json["accounts"] as? Int ?? 0) >= 1)

        Self.expectSuspended(try await Self.silent(stack, alice), Self.contoso, "cached silent")
        Self.expectSuspended(try await Self.silent(stack, alice, force: true), Self.contoso, "force_refresh")
        Self.expectSuspended(
            try await stack.request("POST", "/v1/tokens/silent", json: ["username": "alice@contoso.example", "scopes": ["Mail.Read"]]), Self.contoso,
            "by username, scopes not cached")
        Self.expectSuspended(
            try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": alice]), Self.contoso, "downstream as the account")
        Self.expectSuspended(try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault]]), Self.contoso, "app token")
        Self.expectSuspended(
            try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault], "tenant_id": Self.contoso.uppercased()]),
            Self.contoso, "app token, tenant_id in upper case")
        Self.expectSuspended(
            try await stack.request("POST", "/v1/tokens/on-behalf-of", json: ["assertion": assertion, "scopes": ["User.Read"]]), Self.contoso, "OBO")
        Self.expectSuspended(
            try await stack.request("GET", "/v1/downstream/graph/users/bob@contoso.example", headers: ["X-App-Only": "true"]), Self.contoso,
            "downstream as the app")
        Self.expectSuspended(
            try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-On-Behalf-Of-Assertion": assertion]), Self.contoso,
            "downstream on behalf of")
        #expect(try await stack.emulatorCount() == stsCalls, "a suspended tenant's request reached the STS")
        // The tenant named by its domain: known as suspended from the token's tid (one STS call), then from the cache.
        for _ in 0..<2 {
            Self.expectSuspended(
                try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault], "tenant_id": "contoso.example"]), Self.contoso,
                "app token, tenant named by its domain")
        }
        #expect(try await stack.emulatorCount() == stsCalls + 1)
        // Another tenant is served as before.
        #expect(try await Self.silent(stack, carolId).status == 200)

        // Audited with the acting key id, in the same transaction as the change.
        let audit = try await stack.withDatabase { connection in
            try connection.query("SELECT actor, outcome, detail->>'tenant_id' AS tenant FROM audit_events WHERE action = 'tenant.suspended'").rows.map {
                [$0.string("actor") ?? "", $0.string("outcome") ?? "", $0.string("tenant") ?? ""]
            }
        }
        #expect(audit.count == 1 && audit.first?[1] == "suspended" && audit.first?[2] == Self.contoso, "\(audit)")
        #expect(audit.first?[0] == suspended.json["suspended_by"] as? String)
        // Suspending again is a no-op, audited as such.
        #expect(try await stack.request("POST", "/v1/tenants/\(Self.contoso)/suspend").json["suspended"] as? Bool == true)

        let resumed = try await stack.request("POST", "/v1/tenants/\(Self.contoso)/resume")
        #expect(resumed.status == 200, "\(resumed.text)")
        #expect(resumed.json["suspended"] as? Bool == false)
        #expect(resumed.json["suspended_at"] is NSNull)
        // Served again, without a sign-in: the refresh token was never touched.
        #expect(try #require(try await Self.refreshTokenRow(stack, alice)) == rowBefore)
        let again = try await Self.silent(stack, alice)
        #expect(again.status == 200, "\(again.text)")
        let refreshed = try await Self.silent(stack, alice, force: true)
        #expect(refreshed.status == 200, "\(refreshed.text)")
        #expect(refreshed.json["source"] as? String == "refresh")
        #expect(try await Self.refreshTokenRow(stack, alice)?.0 == rowBefore.0 + 1)
        #expect(try await stack.request("POST", "/v1/tokens/app", json: ["scopes": [Self.graphDefault]]).status == 200)
        #expect(try await stack.request("POST", "/v1/tokens/on-behalf-of", json: ["assertion": assertion, "scopes": ["User.Read"]]).status == 200)
        #expect(try await stack.request("GET", "/v1/downstream/graph/me", headers: ["X-Account-Id": alice]).status == 200)
        let outcomes = try await stack.withDatabase { connection in
            try connection.query("SELECT action, outcome FROM audit_events WHERE action LIKE 'tenant.%' ORDER BY id").rows.map {
                ($0.string("action") ?? "") + ":" + ($0.string("outcome") ?? "")
            }
        }
        #expect(outcomes == ["tenant.suspended:suspended", "tenant.suspended:already_suspended", "tenant.resumed:resumed"])
    }

    @Test("A guest's tenant profile counts: suspending it refuses the guest and that tenant's own users, not the home tenant's others")
    func guestProfileTenant() async throws {
        let stack = try await TokenRelayStack(name: "e2e_tenant_guest")
        defer { stack.stop() }
        let erin = try #require(
            try await StackHelpers.signIn(stack, "erin@contoso.example", authority: "\(stack.emulator.baseURL)/\(Self.contoso)", scopes: ["User.Read"])[
                "account_id"] as? String)
        _ = try await StackHelpers.signIn(stack, "erin@contoso.example", authority: "\(stack.emulator.baseURL)/\(Self.fabrikam)", scopes: ["User.Read"])
        let alice = try await stack.signInAccountId("alice@contoso.example")
        let carol = try #require(
            try await StackHelpers.signIn(
                stack, "carol@fabrikam.example", authority: "\(stack.emulator.baseURL)/\(Self.fabrikam)", scopes: ["User.Read"])["account_id"] as? String)
        #expect(try await stack.request("POST", "/v1/tenants/\(Self.fabrikam)/suspend").status == 200)
        // Erin's home-tenant token is refused too: the account is of the suspended tenant.
        Self.expectSuspended(try await Self.silent(stack, erin), Self.fabrikam, "guest, home-tenant token")
        Self.expectSuspended(try await Self.silent(stack, carol), Self.fabrikam, "the tenant's own user")
        #expect(try await Self.silent(stack, alice).status == 200)
        let tenants = try await stack.request("GET", "/v1/tenants")
        #expect(tenants.status == 200, "\(tenants.text)")
        let rows = tenants.json["tenants"] as? [[String: Any]] ?? []
        let byId = Dictionary(uniqueKeysWithValues: rows.compactMap { row in (row["tenant_id"] as? String).map { ($0, row) } })
        // contoso: alice and erin (home); fabrikam: carol and erin (guest profile).
        #expect(byId[Self.contoso]?["accounts"] as? Int == 2, "\(tenants.text)")
        #expect(byId[Self.fabrikam]?["accounts"] as? Int == 2, "\(tenants.text)")
        #expect(byId[Self.fabrikam]?["suspended"] as? Bool == true)
        #expect(byId[Self.contoso]?["suspended"] as? Bool == false)
        // Each tenant's rows are under its own data key (ADR 0017), wrapped by the ring's key.
        let dataKey = byId[Self.contoso]?["data_key"] as? [String: Any]
        #expect(dataKey?["kind"] as? String == "tenant", "\(tenants.text)")
        let dataKeyId = try #require(dataKey?["data_key_id"] as? String)
        #expect(dataKeyId.hasPrefix("dk."))
        #expect((dataKey?["kek_id"] as? String)?.hasPrefix("ring:") == true)
        #expect(dataKey?["key_ids"] as? [String] == [dataKeyId], "\(tenants.text)")
        let fabrikamKey = (byId[Self.fabrikam]?["data_key"] as? [String: Any])?["data_key_id"] as? String
        #expect(fabrikamKey != nil && fabrikamKey != dataKeyId, "\(tenants.text)")
    }

    @Test("A second replica refuses a suspended tenant within 2 s and serves it again within 2 s of a resume by the CLI")
    func secondReplicaWithinTwoSeconds() async throws {
        // A TTL far above the bound: only the notification can explain an answer within 2 s.
        let (stack, bouncer) = try await ReplicaTests.stackBehindPgBouncer(name: "e2e_tenant_replicas", environment: ["TOKENRELAY_CACHE_TTL_S": "600"])
        defer { bouncer.stop() }
        defer { stack.stop() }
        let other = try await stack.startReplica()
        defer { other.stop() }
        let alice = try await stack.signInAccountId("alice@contoso.example")
        // The other replica holds alice and her token in memory (answered on its server thread).
        #expect(try await Self.silent(stack, alice, on: other.baseURL).status == 200)
        #expect(try await Self.silent(stack, alice, on: other.baseURL).json["source"] as? String == "cache")
        let stsCalls = try await stack.emulatorCount()

        let started = Date()
        #expect(try await stack.request("POST", "/v1/tenants/\(Self.contoso)/suspend").status == 200)
        let refusedAfter = try await ReplicaTests.within(2) {
            try await Self.silent(stack, alice, on: other.baseURL).json["error"] as? String == "tenant_suspended"
        }
        let refusedSeconds = Date().timeIntervalSince(started)
        #expect(refusedAfter != nil, "the other replica still serves the suspended tenant after 2 s")
        #expect(try await stack.emulatorCount() == stsCalls)
        // Its memory of the tenant's tokens was dropped, not only refused.
        let dropped = try await stack.request("GET", other.baseURL + "/metrics", authenticated: false).text
        #expect(dropped.contains(#"tokenrelay_memory_cache_entries{cache="tokens"} 0"#), "tokens of the suspended tenant still held in memory")

        let (status, output) = try await ReplicaTests.cli(["tenants", "resume", Self.contoso], databaseURL: stack.databaseURL)
        #expect(status == 0, "\(output)")
        let servedAfter = try await ReplicaTests.within(2) { try await Self.silent(stack, alice, on: other.baseURL).status == 200 }
        #expect(servedAfter != nil, "the other replica still refuses the resumed tenant after 2 s")

        let (suspendStatus, _) = try await ReplicaTests.cli(["tenants", "suspend", Self.contoso], databaseURL: stack.databaseURL)
        #expect(suspendStatus == 0)
        let cliRefusedAfter = try await ReplicaTests.within(2) {
            try await Self.silent(stack, alice, on: other.baseURL).json["error"] as? String == "tenant_suspended"
        }
        #expect(cliRefusedAfter != nil)
        print(
            "tenant suspension: other replica refused after \(refusedAfter ?? -1) s (\(String(format: "%.3f", refusedSeconds)) s from the POST), "
                + "served after resume by CLI \(servedAfter ?? -1) s, refused after suspend by CLI \(cliRefusedAfter ?? -1) s")
        let metrics = try await stack.request("GET", other.baseURL + "/metrics", authenticated: false).text
        #expect(metrics.contains(#"tokenrelay_invalidations_received_total{kind="tenant.suspended"} 2"#))
        #expect(metrics.contains("tokenrelay_tenants_suspended 1"))
    }

    @Test("The keep-alive pass skips the accounts of a suspended tenant")
    func keepAliveSkipsSuspended() async throws {
        let stack = try await TokenRelayStack(name: "e2e_tenant_keepalive")
        defer { stack.stop() }
        let alice = try await stack.signInAccountId("alice@contoso.example")
        let carol = try #require(
            try await StackHelpers.signIn(
                stack, "carol@fabrikam.example", authority: "\(stack.emulator.baseURL)/\(Self.fabrikam)", scopes: ["User.Read"])["account_id"] as? String)
        try await KeepAliveAndEventsTests.age(stack, alice, days: 70)
        try await KeepAliveAndEventsTests.age(stack, carol, days: 70)
        let aliceBefore = try #require(try await KeepAliveAndEventsTests.generation(stack, alice))
        let carolBefore = try #require(try await KeepAliveAndEventsTests.generation(stack, carol))
        let grants = try await KeepAliveAndEventsTests.refreshGrants(stack)
        let (status, _) = try await ReplicaTests.cli(["tenants", "suspend", Self.contoso], databaseURL: stack.databaseURL)
        #expect(status == 0)

        let pass = try await KeepAliveAndEventsTests.keepAlivePass(stack)
        #expect(pass["ran"] as? Bool == true)
        #expect(pass["refreshed"] as? Int == 1, "\(pass)")
        #expect(try await KeepAliveAndEventsTests.refreshGrants(stack) == grants + 1)
        #expect(try await KeepAliveAndEventsTests.generation(stack, alice) == aliceBefore)
        #expect(try await KeepAliveAndEventsTests.generation(stack, carol) == carolBefore + 1)

        // Resumed, it is idle again and refreshed by the next pass.
        #expect(try await ReplicaTests.cli(["tenants", "resume", Self.contoso], databaseURL: stack.databaseURL).0 == 0)
        #expect(try await KeepAliveAndEventsTests.keepAlivePass(stack)["refreshed"] as? Int == 1)
        #expect(try await KeepAliveAndEventsTests.generation(stack, alice) == aliceBefore + 1)
    }

    @Test("Permissions, bad tenant ids, pre-emptive suspension, listing pages, account events carrying tenant_id, and the CLI")
    func permissionsInputListingAndCLI() async throws {
        let stack = try await TokenRelayStack(name: "e2e_tenant_admin")
        defer { stack.stop() }
        let alice = try await stack.signInAccountId("alice@contoso.example")
        _ = try await stack.signInAccountId("bob@contoso.example")

        // Not admin: 403 on every tenant route.
        let user = try await StackHelpers.createKey(stack, permissions: ["tokens:acquire", "accounts:read", "accounts:write", "downstream:call"])
        for (method, path) in [("POST", "/v1/tenants/\(Self.contoso)/suspend"), ("POST", "/v1/tenants/\(Self.contoso)/resume"), ("GET", "/v1/tenants")] {
            let refused = try await stack.request(method, path, headers: StackHelpers.bearer(user.key), authenticated: false)
            #expect(refused.status == 403 && refused.json["error"] as? String == "forbidden", "\(method) \(path): \(refused.text)")
        }
        // An admin key limited to fabrikam may not suspend contoso, and lists only fabrikam.
        let limited = try await StackHelpers.createKey(stack, name: "fabrikam-admin", permissions: ["admin"], tenants: [Self.fabrikam])
        let foreign = try await stack.request("POST", "/v1/tenants/\(Self.contoso)/suspend", headers: StackHelpers.bearer(limited.key), authenticated: false)
        #expect(foreign.status == 403 && foreign.json["field"] as? String == "tenant_id", "\(foreign.text)")
        // Bad tenant ids: 400 naming tenant_id.
        for bad in ["contoso.example", "common", "1111111111111111111111111111111", "11111111-1111-1111-1111-11111111111g"] {
            let answer = try await stack.request("POST", "/v1/tenants/\(bad)/suspend")
            #expect(answer.status == 400 && answer.json["field"] as? String == "tenant_id", "\(bad): \(answer.text)")
        }
        #expect(try await stack.withDatabase { try $0.query("SELECT 1 FROM tenant_suspensions").rows.count } == 0)

        // A tenant nothing was seen of may be suspended beforehand; it is listed with 0 accounts.
        let early = try await stack.request("POST", "/v1/tenants/\(Self.unseen)/suspend")
        #expect(early.status == 200 && early.json["accounts"] as? Int == 0 && early.json["suspended"] as? Bool == true, "\(early.text)")
        let listed = try await stack.request("GET", "/v1/tenants", headers: StackHelpers.bearer(limited.key), authenticated: false)
        #expect((listed.json["tenants"] as? [[String: Any]])?.compactMap { $0["tenant_id"] as? String } == [], "\(listed.text)")
        let first = try await stack.request("GET", "/v1/tenants?limit=1")
        #expect(first.status == 200, "\(first.text)")
        #expect((first.json["tenants"] as? [[String: Any]])?.first?["tenant_id"] as? String == Self.contoso)
        #expect((first.json["tenants"] as? [[String: Any]])?.first?["accounts"] as? Int == 2)
        let cursor = try #require(first.json["next_cursor"] as? String)
        let second = try await stack.request("GET", "/v1/tenants?limit=1&cursor=\(cursor)")
        #expect((second.json["tenants"] as? [[String: Any]])?.first?["tenant_id"] as? String == Self.unseen)
        #expect(second.json["next_cursor"] is NSNull, "\(second.text)")
        #expect(try await stack.request("GET", "/v1/tenants?cursor=zz").json["field"] as? String == "cursor")
        #expect(try await stack.request("GET", "/v1/tenants?limit=0").json["field"] as? String == "limit")
        #expect(try await stack.request("GET", "/v1/tenants?tenant_id=x").json["field"] as? String == "tenant_id")

        // Account events carry the account's tenant.
        #expect(try await stack.request("DELETE", "/v1/accounts/\(alice)").status == 204)
        let events = try await KeepAliveAndEventsTests.events(stack)
        #expect(events.first { $0["account_id"] as? String == alice }?["tenant_id"] as? String == Self.contoso, "\(events)")

        // The CLI: list, suspend (changed, then not), resume, a bad id.
        let environment = StackHelpers.cliEnvironment(stack)
        let (listStatus, listOutput) = try await CommandLineTests.run(["tenants", "list"], environment: environment)
        #expect(listStatus == 0, "\(listOutput)")
        let page = try JSONSerialization.jsonObject(with: Data(listOutput.utf8)) as? [String: Any]
        #expect((page?["tenants"] as? [[String: Any]])?.compactMap { $0["tenant_id"] as? String } == [Self.contoso, Self.unseen], "\(listOutput)")
        for (arguments, changed, suspended) in [
            (["tenants", "suspend", Self.contoso], true, true), (["tenants", "suspend", Self.contoso], false, true),
            (["tenants", "resume", Self.contoso], true, false), (["tenants", "resume", Self.contoso], false, false),
        ] {
            let (status, output) = try await CommandLineTests.run(arguments, environment: environment)
            let shown = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any]
            #expect(status == 0 && shown?["changed"] as? Bool == changed && shown?["suspended"] as? Bool == suspended, "\(arguments): \(output)")
        }
        let actors = try await stack.withDatabase { connection in
            try connection.query("SELECT DISTINCT actor FROM audit_events WHERE action LIKE 'tenant.%' AND detail->>'tenant_id' = $1", [.text(Self.contoso)])
                .rows.compactMap { $0.string("actor") }
        }
        #expect(actors == ["cli"])
        let bad = try await CommandLineTests.run(["tenants", "suspend", "contoso.example"], environment: environment)
        #expect(bad.0 == 2)
    }
}
