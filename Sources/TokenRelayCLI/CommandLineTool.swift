import Foundation
import HTTPClientBridge
import IdentityCore
import PostgresBridge
import TokenRelayBase
import TokenRelayHTTP
import TokenRelayServer
import TokenRelayStore

/// `token-relay` sub-commands (behaviour §8, §11): `serve`, `migrate`, `check-config`, `healthcheck`,
/// `api-keys create|list|revoke`, `encryption generate-key|rotate|rewrap|create-kek`,
/// `accounts list|show|delete`, `tenants suspend|resume|forget|list`, `audit export`, `keepalive --once`, `bench-seed`. Exit codes: 0 success, 1 failure,
/// 2 usage or configuration error (one clear line on standard error).
public enum CommandLineTool {
    public static func run(_ arguments: [String]) async -> Int32 {
        let loader = ConfigurationLoader()
        if let status = preflight(arguments) { return status }
        do {
            switch arguments.first {
            case "serve", nil:
                return try await serve(loader.load())
            case "migrate":
                return try await migrate(loader.load(requireIdentity: false))
            case "check-config":
                _ = try loader.load()
                print(#"{"status":"ok"}"#)
                return 0
            case "healthcheck":
                return await healthcheck(try loader.load(requireIdentity: false))
            case "api-keys":
                return try await apiKeys(Array(arguments.dropFirst()), loader.load(requireIdentity: false))
            case "encryption":
                switch arguments.dropFirst().first {
                case "generate-key":
                    let id = option("--id", in: arguments) ?? "k" + String(Int(Date().timeIntervalSince1970))
                    // The ring's own rule: an entry `check-config` would refuse is no entry to print.
                    guard KeyRing.isKeyId(id) else {
                        return usageError("--id: \(KeyRing.keyIdRule)", help: ["encryption", "generate-key"])
                    }
                    print(KeyRing.generateEntry(id: id))
                    return 0
                case "rotate":
                    return try await rotateEncryption(Array(arguments.dropFirst(2)), loader.load(requireIdentity: false))
                case "rewrap":
                    return try await rewrapDataKeys(Array(arguments.dropFirst(2)), loader.load(requireIdentity: false))
                case "create-kek":
                    return try createKeyEncryptionKey(loader.load(requireIdentity: false))
                default:
                    return usage("encryption generate-key [--id ID] | rotate [--batch-size N] | rewrap [--batch-size N] | create-kek")
                }
            case "accounts":
                return try await accounts(Array(arguments.dropFirst()), loader.load(requireIdentity: false))
            case "tenants":
                return try await tenants(Array(arguments.dropFirst()), loader.load(requireIdentity: false))
            case "audit":
                return try await audit(Array(arguments.dropFirst()), loader.load(requireIdentity: false))
            case "keepalive":
                return try await keepAlive(Array(arguments.dropFirst()), loader.load())
            case "bench-seed":
                return try await benchSeed(Array(arguments.dropFirst()), loader.load(requireIdentity: false))
            case "--help", "-h", "help":
                printUsage()
                return 0
            default:
                return usage("unknown command '\(arguments[0])'")
            }
        } catch let error as CommandLineUsageError {
            return usage(error.message)
        } catch let error as ConfigurationError {
            FileHandle.standardError.write(Data("token-relay: \(error.description)\n".utf8))
            return 2
        } catch let problem as RelayError {
            FileHandle.standardError.write(Data("token-relay: \(problem.detail)\n".utf8))
            return 1
        } catch let error as StoreError {
            FileHandle.standardError.write(Data("token-relay: \(RelayError(error).detail) (\(error.cause))\n".utf8))
            return 1
        } catch {
            FileHandle.standardError.write(Data("token-relay: \(error)\n".utf8))
            return 1
        }
    }

    private static func serve(_ configuration: Configuration) async throws -> Int32 {
        let logger = Logger(level: configuration.logging.level, logPII: configuration.logging.pii)
        let service = try TokenRelayService(configuration: configuration, logger: logger)
        let host = configuration.http.listenHost
        // Serves until SIGTERM, then stops accepting, lets requests in flight finish, flushes
        // the counts and closes the pool; SIGHUP re-reads the key ring and the credential.
        try await service.run { port in
            // One machine-readable line for scripts and tests that start the binary on port 0.
            FileHandle.standardOutput.write(Data(#"{"event":"listening","port":\#(port),"base_url":"http://\#(host):\#(port)"}"#.utf8 + [10]))
        }
        return 0
    }

    private static func migrate(_ configuration: Configuration) async throws -> Int32 {
        guard !configuration.database.url.isEmpty else {
            throw ConfigurationError(setting: "TOKENRELAY_DATABASE_URL", reason: "is required")
        }
        guard let directory = Migrator.locateDirectory(configured: configuration.database.migrationsDirectory) else {
            throw ConfigurationError(setting: "TOKENRELAY_MIGRATIONS_DIR", reason: "no migrations directory found; set it")
        }
        let migrator = try Migrator(directory: directory)
        let pool = PostgresPool(url: configuration.database.url, size: 1)
        defer { pool.close() }
        let applied = try await migrator.apply(on: pool)
        print(#"{"applied":[\#(applied.map { "\"\($0)\"" }.joined(separator: ","))],"total":\#(migrator.migrations.count)}"#)
        return 0
    }

    /// `/healthz` where it is served: `TOKENRELAY_MANAGEMENT_LISTEN` when set, else `TOKENRELAY_LISTEN`.
    private static func healthcheck(_ configuration: Configuration) async -> Int32 {
        let http = configuration.http
        let (bound, port) = http.managementPort.map { (http.managementHost ?? http.listenHost, $0) } ?? (http.listenHost, http.listenPort)
        // A wildcard address is reached on loopback; an IPv6 address goes in brackets.
        let host: String
        switch bound {
        case "0.0.0.0": host = "127.0.0.1"
        case "::": host = "[::1]"
        default: host = bound.contains(":") ? "[\(bound)]" : bound
        }
        let client = HTTPClient()
        defer { client.shutdown() }
        guard
            let response = try? await client.execute(
                HTTPClientRequest(method: "GET", url: "http://\(host):\(port)/healthz", timeout: 5))
        else {
            return 1
        }
        return response.status == 200 ? 0 : 1
    }

    private static func apiKeys(_ arguments: [String], _ configuration: Configuration) async throws -> Int32 {
        guard !configuration.database.url.isEmpty else {
            throw ConfigurationError(setting: "TOKENRELAY_DATABASE_URL", reason: "is required")
        }
        let pool = PostgresPool(url: configuration.database.url, size: 1)
        defer { pool.close() }
        let store = APIKeyStore(database: Database(pool: pool))
        switch arguments.first {
        case "create":
            guard let name = option("--name", in: arguments) else { return usageError("api-keys create needs --name", help: ["api-keys", "create"]) }
            // Checked before anything else runs, as every option value (the rule is the key store's own).
            if let refusal = APIKeyAuthenticator.refusal(ofName: name) { return usage(refusal) }
            let requested = try listOption("--permissions", in: arguments)
            var permissions: [Permission] = []
            for text in requested {
                guard let permission = Permission(rawValue: text) else {
                    return usage("unknown permission '\(text)'; use \(Permission.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                permissions.append(permission)
            }
            guard !permissions.isEmpty else { return usage("api-keys create needs --permissions") }
            // Both limits are compared in any case (``KeyAccess``): `A,a` is one value twice.
            let noLimit = "; leave the option out for a key without that limit"
            let tenants = try listOption("--tenants", in: arguments, ignoringCase: true, whenNone: noLimit)
            let scopePatterns = try listOption("--scopes", in: arguments, ignoringCase: true, whenNone: noLimit)
            // A tenant the identity platform never names would make a key that sees nothing.
            if let bad = tenants.first(where: { !TenantName.isTenant($0) }) {
                return usage(
                    "--tenants: '\(bad.prefix(40))' is not a tenant id (a GUID such as 72f988bf-86f1-41af-91ab-2d7cd011db47) or a domain name (contoso.onmicrosoft.com)"
                )
            }
            // Scopes hold no whitespace (a request's scopes are split at it), so such a pattern matches nothing.
            if let bad = scopePatterns.first(where: { $0.utf8.count > 256 || $0.containsControlCharacter || $0.contains(" ") }) {
                return usage("--scopes: '\(bad.prefix(40))' is not a scope pattern (at most 256 characters, no blank or control character)")
            }
            let created = try await APIKeyAuthenticator.create(
                name: name, permissions: permissions, tenants: tenants, scopePatterns: scopePatterns, store: store)
            try await AuditStore(database: Database(pool: pool)).record(
                .apiKeyCreated, actor: "cli", accountId: nil, outcome: "success",
                detail: [
                    "key_id": .string(created.keyId), "permissions": .array(permissions.map { .string($0.rawValue) }),
                    "tenants": .array(tenants.map(JSONValue.string)), "scopes": .array(scopePatterns.map(JSONValue.string)),
                ])
            let object: [String: Any] = [
                "key_id": created.keyId, "name": name, "permissions": permissions.map(\.rawValue), "tenants": tenants, "scopes": scopePatterns,
                "api_key": created.apiKey,
            ]
            print(String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self))
            return 0
        case "list":
            for key in try await store.all() {
                let object: [String: Any] = [
                    "key_id": key.keyId, "name": key.name, "permissions": key.permissions.map(\.rawValue), "tenants": key.tenants,
                    "scopes": key.scopePatterns, "created_at": key.createdAt,
                    "revoked_at": key.revokedAt ?? NSNull(),
                ]
                print(String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self))
            }
            return 0
        case "revoke":
            guard arguments.count >= 2 else { return usage("api-keys revoke KEY_ID") }
            let keyId: String
            switch Self.revocableKeyId(arguments[1]) {
            case .keyId(let id): keyId = id
            case .wholeKey(let id):
                // A leaked key pasted whole: its secret is neither echoed nor written to the audit trail.
                return usage("that is a whole API key; revoke it by its id: token-relay api-keys revoke \(id)")
            case .invalid:
                return usage("KEY_ID must be a key's id: the lower-case letters and digits between 'trk_' and the next '_' of the key")
            }
            let revoked = try await store.revoke(keyId)
            try await AuditStore(database: Database(pool: pool)).record(
                .apiKeyRevoked, actor: "cli", accountId: nil, outcome: revoked ? "revoked" : "absent", detail: ["key_id": .string(keyId)])
            printJSON(.object(["key_id": .string(keyId), "revoked": .bool(revoked)]))
            if !revoked { FileHandle.standardError.write(Data("token-relay: no key '\(keyId)' is in force (unknown or already revoked)\n".utf8)) }
            return revoked ? 0 : 1
        default:
            return usage("api-keys create|list|revoke")
        }
    }

    /// The value after the option `name` (`--name VALUE`), or nil.
    package static func option(_ name: String, in arguments: [String]) -> String? {
        guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
        return arguments[index + 1]
    }

    /// A comma-separated option's values (`--permissions a,b`), each trimmed of blanks; empty
    /// when the option is absent.
    /// - Throws: `CommandLineUsageError` naming the option when it names no value (an empty list
    ///   would mean "no limit": `--tenants "$UNSET"` must not make an unrestricted key), when a
    ///   value is empty (`a,,b`, `a,`: a value lost to a typo or an unset variable), or when a
    ///   value is given twice (compared in any case with `ignoringCase`), which was stored twice.
    package static func listOption(
        _ name: String, in arguments: [String], ignoringCase: Bool = false, whenNone hint: String = ""
    ) throws(CommandLineUsageError) -> [String] {
        guard let text = option(name, in: arguments) else { return [] }
        let values = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard values.contains(where: { !$0.isEmpty }) else {
            throw CommandLineUsageError("\(name) names no value\(hint)")
        }
        guard !values.contains(where: \.isEmpty) else {
            throw CommandLineUsageError("\(name) holds an empty value (two commas, or one at either end); separate the values with single commas")
        }
        var seen: Set<String> = []
        for value in values where !seen.insert(ignoringCase ? value.lowercased() : value).inserted {
            throw CommandLineUsageError("\(name): '\(value.prefix(40))' is given twice; give each value once")
        }
        return values
    }

    /// A command's arguments that cannot be used: exit 2 with `message` on standard error.
    package struct CommandLineUsageError: Error {
        package let message: String
        package init(_ message: String) { self.message = message }
    }

    /// What `api-keys revoke` was given (behaviour §7.1 key ids): a key id (`[a-z0-9]`, 8–64
    /// characters), a whole `trk_<keyid>_<secret>` key (its id, never its secret), or neither.
    package enum RevokeArgument: Equatable {
        case keyId(String)
        case wholeKey(id: String)
        case invalid
    }

    package static func revocableKeyId(_ argument: String) -> RevokeArgument {
        // The keys' own grammar (``APIKeyAuthenticator/split(_:)``), not a second reading of it.
        func isKeyId(_ text: Substring) -> Bool { text.utf8.count <= 64 && text.utf8.allSatisfy(APIKeyAuthenticator.isKeyIdByte) }
        if let (id, _) = APIKeyAuthenticator.split(Substring(argument)) { return isKeyId(id) ? .wholeKey(id: String(id)) : .invalid }
        return argument.utf8.count >= 8 && isKeyId(Substring(argument)) ? .keyId(argument) : .invalid
    }

    package static func usage(_ message: String) -> Int32 {
        FileHandle.standardError.write(Data("token-relay: \(message)\n".utf8))
        return 2
    }

    private static func printUsage() {
        print(
            """
            usage: token-relay <command>
              serve                      serve HTTP (the default command)
              migrate                    apply pending migrations and exit
              check-config               validate the configuration and exit
              healthcheck                exit 0 when /healthz passes
              api-keys create --name NAME --permissions p1,p2 [--tenants t1,t2] [--scopes "User.*,https://vault.azure.net/*"]
              api-keys list | revoke KEY_ID
              encryption generate-key [--id ID]
              encryption rotate [--batch-size N]   rewrap data keys, re-encrypt rows still under a ring key
              encryption rewrap [--batch-size N]   wrap every tenant's data key under the primary KEK
              encryption create-kek                make the AES key TOKENRELAY_PKCS11_KEY_LABEL names in the token
              accounts list [--limit N] [--cursor C] [--username U] [--tenant-id T] | show ACCOUNT_ID | delete ACCOUNT_ID
              tenants suspend TENANT_ID | resume TENANT_ID   switch a customer tenant off / on
              tenants forget TENANT_ID --yes                 offboard: delete its accounts and tokens, destroy its data key
              tenants forget TENANT_ID --dry-run             what --yes would delete; changes nothing
              tenants list [--limit N] [--cursor C]
              audit export --since TIME [--until TIME] [--actor A] [--action X] [--account-id ID]   the audit trail as JSON lines
              keepalive --once           run one refresh-token keep-alive pass and exit
              bench-seed --accounts N    benchmark tool (bench/scale): seed N accounts with cached tokens
            every command and sub-command takes --help
            configuration: TOKENRELAY_* environment variables (see README.md)
            """)
    }
}
