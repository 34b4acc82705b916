import Foundation
import PostgresBridge
import Testing
import TokenRelayTesting

/// `token-relay` sub-commands against the same database a running service uses.
@Suite("token-relay command line", .serialized)
struct CommandLineTests {
    /// Runs the built `token-relay` with `arguments`; returns (exit status, standard output).
    static func run(_ arguments: [String], environment: [String: String]) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: BuiltProducts.path("token-relay"))
        process.arguments = arguments
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test("api-keys create prints the key once; it authenticates with exactly its permissions; list and revoke are audited")
    func apiKeys() async throws {
        let stack = try await TokenRelayStack(name: "e2e_cli")
        defer { stack.stop() }
        let environment = ["TOKENRELAY_DATABASE_URL": stack.databaseURL, "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin"]
        let (status, output) = try Self.run(["api-keys", "create", "--name", "reporting", "--permissions", "accounts:read"], environment: environment)
        #expect(status == 0)
        let created = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        let key = try #require(created["api_key"] as? String)
        let keyId = try #require(created["key_id"] as? String)
        #expect(key.hasPrefix("trk_\(keyId)_"))

        let allowed = try await stack.request("GET", "/v1/accounts", headers: ["Authorization": "Bearer \(key)"], authenticated: false)
        #expect(allowed.status == 200)
        let forbidden = try await stack.request(
            "POST", "/v1/tokens/silent", json: ["account_id": "a", "scopes": ["User.Read"]], headers: ["Authorization": "Bearer \(key)"], authenticated: false)
        #expect(forbidden.status == 403)
        #expect(forbidden.json["error"] as? String == "forbidden")
        let wrongSecret = try await stack.request("GET", "/v1/accounts", headers: ["Authorization": "Bearer trk_\(keyId)_wrong"], authenticated: false)
        #expect(wrongSecret.status == 401)

        let (_, listed) = try Self.run(["api-keys", "list"], environment: environment)
        #expect(listed.contains(keyId))
        #expect(!listed.contains(key))
        #expect(try Self.run(["api-keys", "revoke", keyId], environment: environment).0 == 0)
        #expect(try Self.run(["api-keys", "create", "--name", "x", "--permissions", "everything"], environment: environment).0 == 2)

        let actions = try await stack.withDatabase { connection in
            try connection.query("SELECT action FROM audit_events ORDER BY id").rows.compactMap { $0.string("action") }
        }
        #expect(actions == ["api_key.created", "api_key.revoked"])
        let stored = try await stack.withDatabase { connection in
            try connection.query("SELECT encode(secret_hash, 'hex') AS h FROM api_keys").rows.compactMap { $0.string("h") }
        }
        #expect(stored.count == 1 && !key.contains(stored[0]))
    }

    @Test("check-config names the bad setting and exits 2")
    func checkConfig() throws {
        let (status, _) = try Self.run(["check-config"], environment: ["TOKENRELAY_CLIENT_ID": "x"])
        #expect(status == 2)
    }
}
