import Foundation
import Testing
import TokenRelayTesting

/// `/healthz` in the shape `/readyz` answers (behaviour §8, §12 Health; issue 10 item 5): the IETF
/// "Health Check Response Format for HTTP APIs" draft (draft-inadarei-api-health-check-06 §3:
/// `status`, `version`, `releaseId`, `checks` whose values are arrays of objects with
/// `observedValue`, `observedUnit`, `status`, `time`), and a `releaseId` naming the build.
@Suite("Liveness in the readiness shape, with the build's release id", .serialized)
struct HealthShapeTests {
    /// `version+<12 hex digits of the commit>[.dirty]`, or `version+unknown` built without git.
    static var releasePattern: Regex<(Substring, Substring, Substring?)> { #/^(\d+\.\d+\.\d+)\+(?:([0-9a-f]{12})(?:\.dirty)?|unknown)$/# }

    @Test("/healthz is health+json with version, releaseId of the built commit and an uptime check in seconds")
    func livenessShape() async throws {
        let stack = try await TokenRelayStack(name: "e2e_health_shape")
        defer { stack.stop() }
        let first = try await stack.request("GET", "/healthz", authenticated: false)
        #expect(first.status == 200)
        #expect(first.headers["Content-Type"] == "application/health+json")
        #expect(first.json["status"] as? String == "pass")
        let version = try #require(first.json["version"] as? String)
        let releaseId = try #require(first.json["releaseId"] as? String)
        #expect(!releaseId.contains("skeleton"), "\(releaseId)")
        let match = try #require(releaseId.wholeMatch(of: Self.releasePattern), "releaseId '\(releaseId)' names no build")
        #expect(String(match.1) == version)
        if let commit = match.2 {
            // The commit the binary was built from exists in this checkout.
            let git = try await BuiltProducts.run(
                executableAt: "/usr/bin/env", ["git", "-C", BuiltProducts.packageRoot(), "cat-file", "-e", "\(commit)^{commit}"], environment: nil)
            #expect(git.status == 0, "commit \(commit) of releaseId is not in the repository")
        }

        let checks = try #require(first.json["checks"] as? [String: Any], "\(first.text)")
        let uptime = try #require((checks["uptime"] as? [[String: Any]])?.first, "\(first.text)")
        #expect(uptime["observedUnit"] as? String == "s")
        #expect(uptime["status"] as? String == "pass")
        let seconds = try #require(uptime["observedValue"] as? Double)
        #expect(seconds >= 0 && seconds < 600)
        let time = try #require(uptime["time"] as? String)
        #expect((try? Date(time, strategy: .iso8601)) != nil, "time '\(time)' is not RFC 3339")
        for (name, value) in checks {
            #expect((value as? [[String: Any]])?.isEmpty == false, "check \(name) is not an array of objects")
        }

        try await Task.sleep(for: .milliseconds(1100))
        let later = try await stack.request("GET", "/healthz", authenticated: false)
        let laterSeconds = try #require(((later.json["checks"] as? [String: Any])?["uptime"] as? [[String: Any]])?.first?["observedValue"] as? Double)
        #expect(laterSeconds >= seconds + 1)

        // The same build on both probes.
        let ready = try await stack.request("GET", "/readyz", authenticated: false)
        #expect(ready.json["releaseId"] as? String == releaseId)
        #expect(ready.json["version"] as? String == version)
    }
}
