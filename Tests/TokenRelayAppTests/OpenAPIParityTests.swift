import Foundation
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore
import TokenRelayTesting

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

    /// The query parameters each operation under `paths:` documents (`- name:` then `in: query`),
    /// by "METHOD path".
    static func documentedQueryParameters() throws -> [String: Set<String>] {
        let text = try String(contentsOfFile: BuiltProducts.packageRoot() + "/openapi.yaml", encoding: .utf8)
        var parameters: [String: Set<String>] = [:]
        var inPaths = false
        var currentPath: String?
        var operation: String?
        var name: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if !line.hasPrefix(" ") && !line.isEmpty {
                inPaths = line.hasPrefix("paths:")
                continue
            }
            guard inPaths else { continue }
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("  /"), !line.hasPrefix("   "), line.hasSuffix(":") {
                currentPath = String(line.dropFirst(2).dropLast())
                operation = nil
            } else if line.hasPrefix("    "), !line.hasPrefix("     "), let path = currentPath {
                let key = String(trimmed.dropLast())
                operation = methods.contains(key) ? "\(key.uppercased()) \(path)" : nil
            } else if trimmed.hasPrefix("- name: ") {
                name = String(trimmed.dropFirst("- name: ".count))
            } else if trimmed == "in: query", let operation, let found = name {
                parameters[operation, default: []].insert(found)
                name = nil
            }
        }
        return parameters
    }

    /// One rule for query parameters (behaviour §7.4): what a route takes is what the contract
    /// documents, so a documented parameter is never refused and an undocumented one never read.
    @Test("Each route takes exactly the query parameters openapi.yaml documents for it")
    func queryParameters() throws {
        let configuration = Configuration.offline()
        let service = try TokenRelayService(configuration: configuration, logger: Logger(level: .error, logPII: false, sink: .memory()))
        defer { service.stop() }
        let documented = try Self.documentedQueryParameters()
        for route in service.dependencies.router.routes {
            let operation = "\(route.method) \(route.template.replacingOccurrences(of: "...}", with: "}"))"
            let names = documented[operation] ?? []
            switch route.query {
            case .none: #expect(names == [], "\(operation) takes none")
            case .only(let taken): #expect(names == Set(taken), "\(operation)")
            // The downstream relay passes any on; the callback takes what the identity platform sends.
            case .any: #expect(route.template.hasPrefix("/v1/downstream") || names.isSuperset(of: ["code", "state", "error"]), "\(operation)")
            }
        }
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
