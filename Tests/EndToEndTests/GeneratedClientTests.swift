import Foundation
import Testing
import TokenRelayTesting

/// A Python client generated from openapi.yaml by `openapi-python-client` (PyPI) signs a user
/// in, gets a silent token and calls Graph /me against the real service (issue 6), then reaches
/// Graph routes of several segments through `/v1/downstream-encoded` (issue 29 item 2: `me`,
/// `me/messages` paged, `sendMail`, an id holding `%2F`): a response that does not match its
/// schema, or a route the spec names wrongly, fails here.
/// `make test` installs the generator (scripts/python-tools) and sets TOKENRELAY_TEST_PYTHON_BIN.
@Suite("Generated client")
struct GeneratedClientTests {
    /// Runs `executable` with this process's environment plus `environment`; returns its exit
    /// status and its standard error followed by its standard output (whose last line stays last).
    static func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) async throws -> (Int32, String) {
        let run = try await BuiltProducts.run(
            executableAt: executable, arguments, environment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
        return (run.status, run.error + run.output)
    }

    @Test("A Python client generated from openapi.yaml runs sign-in, silent token and Graph /me")
    func pythonClientFlow() async throws {
        let bin = try #require(
            ProcessInfo.processInfo.environment["TOKENRELAY_TEST_PYTHON_BIN"],
            "set TOKENRELAY_TEST_PYTHON_BIN to the bin directory printed by scripts/python-tools (make test does)")
        let root = BuiltProducts.packageRoot()
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("tokenrelay-client-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }

        let (generated, generatorOutput) = try await Self.run(
            bin + "/openapi-python-client",
            ["generate", "--path", root + "/openapi.yaml", "--meta", "none", "--output-path", work + "/tokenrelay_client"])
        #expect(generated == 0, "openapi-python-client failed:\n\(generatorOutput)")
        #expect(FileManager.default.fileExists(atPath: work + "/tokenrelay_client/api/tokens/acquire_token_silent.py"))

        let stack = try await TokenRelayStack(name: "e2e_generated_client")
        defer { stack.stop() }
        let (status, output) = try await Self.run(
            bin + "/python", [root + "/Tests/python/generated_client_flow.py", work],
            environment: ["TR_BASE_URL": stack.baseURL, "TR_API_KEY": stack.apiKey, "TR_USERNAME": "alice@contoso.example"])
        #expect(status == 0, "generated client flow failed:\n\(output)")
        #expect(output.contains("generated client flow: ok"))
        // What Graph was asked for: each path as the client meant it, the encoded `/` kept inside its segment.
        let asked = try await GraphSDKTests.graphRequests(stack).map { "\($0["method"] ?? "") \($0["path"] ?? "")" }
        #expect(asked.filter { $0 == "GET /v1.0/me" }.count == 2, "\(asked)")
        #expect(asked.filter { $0 == "POST /v1.0/me/messages" }.count == 12, "\(asked)")
        #expect(asked.filter { $0 == "GET /v1.0/me/messages" }.count == 2, "two pages: \(asked)")
        #expect(asked.filter { $0 == "POST /v1.0/me/sendMail" }.count == 1, "\(asked)")
        #expect(asked.last == "GET /v1.0/users/alice@contoso.example%2Fx", "\(asked)")
    }
}
