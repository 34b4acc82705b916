import Foundation
import Testing
import TokenRelayTesting

/// What is stored and what is logged (behaviour §7): a database dump shows no token, the service's
/// log shows no token and no username unless `TOKENRELAY_LOG_PII` is on.
@Suite("Secrets at rest and in logs", .serialized)
struct SecretsAtRestTests {
    static func hex(_ text: String) -> String { text.utf8.map { String(format: "%02x", $0) }.joined() }

    /// `pg_dump` of the stack's database in plain SQL.
    static func dump(_ databaseURL: String) async throws -> String {
        let run = try await BuiltProducts.run(
            executableAt: "/usr/bin/env", ["pg_dump", "--no-owner", "--format=plain", "--dbname=\(databaseURL)"], environment: nil)
        guard run.status == 0 else { throw TestFailure("pg_dump exited \(run.status)") }
        return run.output
    }

    @Test("pg_dump of the database holds none of the refresh, access or id tokens, codes, client secret or API key")
    func databaseDumpShowsNoToken() async throws {
        let stack = try await TokenRelayStack(name: "e2e_dump")
        defer { stack.stop() }
        for user in ["alice@contoso.example", "bob@contoso.example"] {
            let id = try await stack.signInAccountId(user)
            for force in [false, true, true] {
                let answer = try await stack.request(
                    "POST", "/v1/tokens/silent", json: ["account_id": id, "scopes": ["User.Read"], "force_refresh": force])
                #expect(answer.status == 200, "\(answer.text)")
            }
        }
        #expect(try await stack.request("POST", "/v1/sign-ins", json: ["scopes": ["User.Read"]]).status == 201)
        let issued = try await stack.issuedSecrets()
        // The test can fail only if it has something to look for.
        #expect(issued.refreshTokens.count >= 6)
        #expect(issued.accessTokens.count >= 6)
        #expect(issued.idTokens.count >= 2)
        #expect(issued.codes.count >= 2)

        let dump = try await Self.dump(stack.databaseURL)
        #expect(dump.contains("COPY public.refresh_tokens"))
        #expect(dump.contains("alice@contoso.example"), "the dump holds the accounts (a sanity check of the dump itself)")
        let named: [(String, [String])] = [
            ("refresh token", issued.refreshTokens), ("access token", issued.accessTokens), ("id token", issued.idTokens),
            ("authorization code", issued.codes), ("client secret", [stack.clientSecret]), ("API key", [stack.apiKey]),
        ]
        for (kind, secrets) in named {
            for (index, secret) in secrets.enumerated() where dump.contains(secret) || dump.contains(Self.hex(secret)) {
                Issue.record("the dump holds \(kind) #\(index)")
            }
        }
        // Not even the signature of a JWT (an id token's claims may be kept; its signature never).
        for (index, token) in (issued.accessTokens + issued.idTokens).enumerated() {
            if let signature = token.split(separator: ".").last, dump.contains(signature) { Issue.record("the dump holds JWT signature #\(index)") }
        }
    }

    @Test("The service logs usernames only with TOKENRELAY_LOG_PII=true", arguments: [false, true])
    func usernamesOnlyWithLogPII(logPII: Bool) async throws {
        let stack = try await TokenRelayStack(name: "e2e_pii", environment: ["TOKENRELAY_LOG_PII": String(logPII)])
        defer { stack.stop() }
        _ = try await stack.signInAccountId("alice@contoso.example")
        let lookedUp = try await stack.request("GET", "/v1/accounts?username=alice%40contoso.example")
        #expect(lookedUp.status == 200)
        let log = stack.relay.log()
        #expect(log.contains("sign_in.completed"))
        #expect(log.lowercased().contains("alice@contoso.example") == logPII)
    }

    @Test("scripts/scan-test-logs names the file and line of a recorded secret, a JWT or a trk_ key, never the value")
    func logScanFindsPlantedSecrets() async throws {
        let directory = NSTemporaryDirectory() + "scan-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let secret = "planted-" + UUID().uuidString
        let jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.c2lnbmF0dXJl"
        let apiKey = "trk_abcdefgh_" + UUID().uuidString
        func scan() async throws -> (Int32, String) {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try Data((secret + "\n").utf8).write(to: URL(fileURLWithPath: directory + "/stack.secrets"))
            let run = try await BuiltProducts.run(executableAt: BuiltProducts.packageRoot() + "/scripts/scan-test-logs", [directory], environment: nil)
            return (run.status, run.output)
        }
        try Data(#"{"event":"fine"}\n"#.utf8).write(to: URL(fileURLWithPath: directory + "/clean.log"))
        #expect(try await scan().0 == 0)
        #expect(!FileManager.default.fileExists(atPath: directory + "/stack.secrets"), "the recorded secrets are deleted after the scan")

        try Data("one\nthe secret \(secret) here\n\(jwt)\n\(apiKey)\n".utf8).write(to: URL(fileURLWithPath: directory + "/leaky.log"))
        let (status, output) = try await scan()
        #expect(status == 1)
        #expect(output.contains("leaky.log: line(s) 2 hold a secret"))
        #expect(output.contains("leaky.log: line(s) 3 hold a JWT-shaped string"))
        #expect(output.contains("leaky.log: line(s) 4 hold a trk_ API key"))
        for value in [secret, jwt, apiKey] { #expect(!output.contains(value)) }
    }
}
