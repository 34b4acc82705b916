import Foundation
import Testing
import TokenRelayTesting

/// behaviour §12 Memories and replicas under load (issue 10 item 8): a sign-in on one replica clears
/// the account's throttle and UI-required memories on the two others while they are busy with
/// concurrent requests, comfortably within the 2 s bound (here: 1 s), through pgbouncer with
/// LISTEN on a direct connection as in production.
@Suite("A sign-in clears other replicas' memories under load, end to end", .serialized, .timingGroup(.measuring))
struct SignInInvalidationUnderLoadTests {
    static let alice = "alice@contoso.example"
    /// The bound asserted: behaviour §12's 2 s. Measured here well under it (0.06–0.76 s with up to
    /// 256 callers); asserting less made the test fail by chance on a loaded machine.
    static let bound = 2.0
    /// Concurrent callers loading B and C (half each).
    static let callers = Int(ProcessInfo.processInfo.environment["TOKENRELAY_TEST_LOAD_CALLERS"] ?? "") ?? 48
    /// One request in this many is a forced refresh (an STS call and database writes); the rest are cache hits.
    static let forcedEvery = Int(ProcessInfo.processInfo.environment["TOKENRELAY_TEST_LOAD_FORCED_EVERY"] ?? "") ?? 8

    static func silent(_ stack: TokenRelayStack, _ base: String, _ id: String, _ scopes: [String], force: Bool = false) async throws -> TestResponse {
        var body: [String: Any] = ["account_id": id, "scopes": scopes]
        if force { body["force_refresh"] = true }
        return try await stack.request("POST", base + "/v1/tokens/silent", json: body, headers: ["Request-Timeout": "1.5"])
    }

    /// Puts `id` in `base`'s throttle memory (a 429 Retry-After 60 on a forced refresh) and its
    /// UI-required memory (AADSTS50076 for Sites.Read.All), and checks both answer from memory.
    static func remember(_ stack: TokenRelayStack, _ base: String, _ id: String) async throws {
        _ = try await stack.control("POST", "/_control/faults", json: ["endpoint": "token", "status": 429, "retry_after": "60"])
        #expect(try await silent(stack, base, id, ["User.Read"], force: true).status == 429)
        _ = try await stack.control(
            "POST", "/_control/faults",
            json: ["endpoint": "token", "status": 400, "error": "invalid_grant", "error_codes": [50076], "suberror": "basic_action"])
        #expect(try await silent(stack, base, id, ["Sites.Read.All"]).status == 409)
        // No fault is left: only the memories can refuse now.
        let before = try await stack.emulatorCount()
        #expect(try await silent(stack, base, id, ["User.Read"], force: true).status == 429)
        #expect(try await silent(stack, base, id, ["Sites.Read.All"]).status == 409)
        #expect(try await stack.emulatorCount() == before, "answered from the memories")
    }

    /// `account.signed_in` notifications `base` has received so far (its metric).
    static func signInsHeard(_ stack: TokenRelayStack, _ base: String) async throws -> Double {
        let metrics = try await stack.request("GET", base + "/metrics", authenticated: false).text
        let prefix = #"tokenrelay_invalidations_received_total{kind="account.signed_in"} "#
        return metrics.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Double($0.dropFirst(prefix.count)) } ?? 0
    }

    @Test("Sign-in on replica A while B and C serve concurrent requests: B and C forget the account's throttle and UI-required memories within 2 s")
    func signInClearsMemoriesUnderLoad() async throws {
        ReplicaTests.raiseOpenFileLimit()
        // A TTL far above the bound: only the notification can explain a cleared memory.
        let replicas = try await ThreeReplicas.start(name: "e2e_signin_load", environment: ["TOKENRELAY_CACHE_TTL_S": "600"])
        defer { replicas.stop() }
        let (stack, second, third) = (replicas.stack, replicas.second, replicas.third)
        let busy = [second.baseURL, third.baseURL]

        let id = try await stack.signInAccountId(Self.alice)
        var accounts: [String] = []
        for user in ["bob@contoso.example", "erin@contoso.example"] {
            accounts.append(try await stack.signInAccountId(user))
        }
        let others = accounts
        for base in busy { try await Self.remember(stack, base, id) }

        // Load on B and C: cache hits with a forced refresh now and then.
        let load = LoadSwitch()
        let callers = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for caller in 0..<Self.callers {
                    group.addTask {
                        var round = 0
                        while !load.isStopped {
                            round += 1
                            let account = others[(caller + round) % others.count]
                            _ = try? await Self.silent(stack, busy[caller % 2], account, ["User.Read"], force: round % Self.forcedEvery == 0)
                            load.countServed()
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        defer { load.stop() }
        try await Task.sleep(for: .seconds(2))
        let servedBefore = load.served

        // The sign-in on A; then B and C are polled until each memory is gone.
        var heard: [Double] = []
        for base in busy { heard.append(try await Self.signInsHeard(stack, base)) }
        let heardBefore = heard
        let signInStarted = Date()
        #expect(try await stack.signInAccountId(Self.alice, on: stack.baseURL) == id)
        let signedIn = Date()
        let times = try await withThrowingTaskGroup(of: (String, Double?).self) { group in
            for (index, base) in busy.enumerated() {
                let name = ["B", "C"][index]
                group.addTask {
                    (
                        "\(name) throttle",
                        try await ReplicaTests.within(5) { try await Self.silent(stack, base, id, ["User.Read"], force: true).status == 200 }
                    )
                }
                group.addTask {
                    // When the notification arrived (the hooks run right after, on the listener's thread).
                    (
                        "\(name) notified",
                        try await ReplicaTests.within(5) { try await Self.signInsHeard(stack, base) > heardBefore[index] }
                    )
                }
                group.addTask {
                    ("\(name) ui_required", try await ReplicaTests.within(5) { try await Self.silent(stack, base, id, ["Sites.Read.All"]).status == 200 })
                }
            }
            return try await group.reduce(into: [String: Double?]()) { $0[$1.0] = $1.1 }
        }
        let loadRate = Double(load.served - servedBefore) / Date().timeIntervalSince(signInStarted)
        load.stop()
        try await callers.value
        let report = times.keys.sorted().map { "\($0) \(times[$0].flatMap { $0 }.map { String(format: "%.3f", $0) } ?? "never") s" }
        print(
            "sign-in invalidation under load (\(Int(loadRate)) req/s on B+C): sign-in took \(String(format: "%.3f", signedIn.timeIntervalSince(signInStarted))) s; cleared after: \(report.joined(separator: ", "))"
        )
        for (name, seconds) in times where !name.hasSuffix("notified") {
            #expect(seconds != nil, "\(name): still remembered 5 s after the sign-in")
            #expect((seconds ?? .infinity) <= Self.bound, "\(name): cleared after \(seconds ?? -1) s, over \(Self.bound) s")
        }
    }
}
