import Foundation
import Testing
import TokenRelayTesting

@testable import TokenRelayApp

/// `openapi.yaml` is the integrators' contract: every route the router serves is documented,
/// and every documented operation is served.
@Suite("OpenAPI parity")
struct OpenAPIParityTests {
    static let methods: Set<String> = ["get", "put", "post", "delete", "patch", "head", "options", "trace"]

    /// (METHOD, path) pairs under `paths:` of the YAML document, read by indentation.
    static func documentedOperations() throws -> Set<String> {
        let text = try String(contentsOfFile: BuiltProducts.packageRoot() + "/openapi.yaml", encoding: .utf8)
        var operations = Set<String>()
        var inPaths = false
        var currentPath: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if !line.hasPrefix(" ") && !line.isEmpty {
                inPaths = line.hasPrefix("paths:")
                continue
            }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), !line.hasPrefix("   "), line.hasSuffix(":") {
                currentPath = String(line.dropFirst(2).dropLast())
            } else if line.hasPrefix("    "), !line.hasPrefix("     "), let path = currentPath {
                let key = line.trimmingCharacters(in: .whitespaces).dropLast()
                if line.hasSuffix(":"), methods.contains(String(key)) { operations.insert("\(key.uppercased()) \(path)") }
            }
        }
        return operations
    }

    @Test("Every served route is in openapi.yaml and every documented operation is served")
    func parity() throws {
        let configuration = Configuration.offline()
        let service = try TokenRelayService(configuration: configuration, logger: Logger(level: .error, logPII: false, sink: .memory()))
        defer { service.stop() }
        let served = Set(service.routeTable.map { "\($0.method) \($0.path)" })
        let documented = try Self.documentedOperations()
        #expect(!served.isEmpty)
        #expect(served.subtracting(documented).sorted() == [], "served but not documented")
        #expect(documented.subtracting(served).sorted() == [], "documented but not served")
    }
}
