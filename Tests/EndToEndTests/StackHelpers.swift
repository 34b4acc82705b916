import Foundation
import TokenRelayTesting

/// What several live suites share: API keys made with the built CLI, and sign-ins through a
/// named authority. (The in-process suites have their own in `InProcessApp`.)
enum StackHelpers {
    static let otherTenant = "22222222-2222-2222-2222-222222222222"
    static let fabrikam = otherTenant

    /// Creates a key with the CLI; returns (api_key, key_id).
    /// - Parameter name: the key's name, its owner of external ids (behaviour §3.7).
    static func createKey(
        _ stack: TokenRelayStack, name: String = "test", permissions: [String], tenants: [String] = [], scopes: [String] = []
    ) async throws -> (key: String, keyId: String) {
        var arguments = ["api-keys", "create", "--name", name, "--permissions", permissions.joined(separator: ",")]
        if !tenants.isEmpty { arguments += ["--tenants", tenants.joined(separator: ",")] }
        if !scopes.isEmpty { arguments += ["--scopes", scopes.joined(separator: ",")] }
        let (status, output) = try await CommandLineTests.run(arguments, environment: cliEnvironment(stack))
        guard status == 0, let object = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any],
            let key = object["api_key"] as? String, let keyId = object["key_id"] as? String
        else { throw TestFailure("api-keys create exited \(status): \(output)") }
        try await awaitKnown(key, on: [stack.baseURL], stack)
        return (key, keyId)
    }

    /// Waits until each replica at `baseURLs` knows `key` (up to 2 s): a key made by the CLI
    /// reaches a replica's key directory by notification, a few milliseconds after it commits
    /// (behaviour §7.1).
    static func awaitKnown(_ key: String, on baseURLs: [String], _ stack: TokenRelayStack) async throws {
        for baseURL in baseURLs {
            let started = ContinuousClock.now
            while started.duration(to: .now) < .seconds(2) {
                let probe = try await stack.request("GET", baseURL + "/v1/accounts?limit=1", headers: ["Authorization": "Bearer \(key)"], authenticated: false)
                if probe.status != 401 { break }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    static func cliEnvironment(_ stack: TokenRelayStack) -> [String: String] {
        ["TOKENRELAY_DATABASE_URL": stack.databaseURL, "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin"]
    }

    static func bearer(_ key: String) -> [String: String] { ["Authorization": "Bearer \(key)"] }

    /// Signs `username` in through `authority` as a browser would; returns the account object.
    static func signIn(_ stack: TokenRelayStack, _ username: String, authority: String, scopes: [String]) async throws -> [String: Any] {
        let callback = try await stack.signInThroughBrowser(username, scopes: scopes, authority: authority)
        guard let account = callback["account"] as? [String: Any] else { throw TestFailure("the callback answered no account: \(callback)") }
        return account
    }
}
