import Foundation
import IdentityCore
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayStore

/// Reads `Configuration` from `TOKENRELAY_*` environment variables over an optional JSON file
/// (`TOKENRELAY_CONFIG`, lower-case names without the prefix). Every secret setting can also be
/// read from a file named by `NAME_FILE` (systemd credentials, Kubernetes secrets).
public struct ConfigurationLoader: Sendable {
    private let environment: [String: String]

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.environment = environment
    }

    /// Builds and validates the configuration.
    /// - Parameter requireIdentity: whether the client id, authority and key ring must be present
    ///   (`serve` needs them; `migrate` does not).
    /// - Throws: `ConfigurationError` naming the first bad setting.
    public func load(requireIdentity: Bool = true) throws -> Configuration {
        let file = try fileSettings()
        func value(_ name: String) throws -> String? {
            let variable = "TOKENRELAY_" + name.uppercased()
            if let direct = environment[variable], !direct.isEmpty { return direct }
            if let path = environment[variable + "_FILE"], !path.isEmpty {
                guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                    throw ConfigurationError(setting: variable + "_FILE", reason: "cannot read the file")
                }
                return text.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            return file[name]
        }
        func int(_ name: String, _ range: ClosedRange<Int>) throws -> Int? {
            guard let text = try value(name) else { return nil }
            guard let number = Int(text.trimmingCharacters(in: .whitespaces)), range.contains(number) else {
                throw ConfigurationError(setting: "TOKENRELAY_" + name.uppercased(), reason: "must be an integer in \(range.lowerBound)...\(range.upperBound)")
            }
            return number
        }
        func bool(_ name: String) throws -> Bool? {
            guard let text = try value(name)?.lowercased() else { return nil }
            switch text {
            case "1", "true", "yes", "on": return true
            case "0", "false", "no", "off": return false
            default: throw ConfigurationError(setting: "TOKENRELAY_" + name.uppercased(), reason: "must be true or false")
            }
        }
        func list(_ name: String) throws -> [String]? {
            try value(name).map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty } }
        }

        var config = Configuration()
        if let listen = try value("listen") {
            (config.http.listenHost, config.http.listenPort) = try Self.hostAndPort(listen, setting: "TOKENRELAY_LISTEN")
        }
        if let listen = try value("management_listen") {
            let (host, port) = try Self.hostAndPort(listen, setting: "TOKENRELAY_MANAGEMENT_LISTEN")
            // The API's own address is the default: one listener, as when unset.
            if host != config.http.listenHost || port != config.http.listenPort || port == 0 {
                (config.http.managementHost, config.http.managementPort) = (host, port)
            }
        }
        config.http.readinessCheckIntervalSeconds =
            try int("readiness_check_interval_s", 1...3600) ?? config.http.readinessCheckIntervalSeconds
        config.http.accountHealthIntervalSeconds =
            try int("account_health_interval_s", 1...3600) ?? config.http.accountHealthIntervalSeconds
        config.database.url = try value("database_url") ?? ""
        config.database.poolSize = try int("database_pool_size", 1...256) ?? config.database.poolSize
        config.identity.clientId = try value("client_id") ?? ""
        config.credential.secret = try value("client_secret")
        config.credential.certificate = try value("client_certificate")
        config.credential.assertionAlgorithm = try value("client_assertion_algorithm") ?? config.credential.assertionAlgorithm
        config.credential.assertionFile = try value("client_assertion_file")
        config.identity.authority = try value("authority") ?? ""
        config.identity.knownAuthorities = try list("known_authorities") ?? []
        config.identity.allowHTTPLoopback = try bool("allow_http_loopback") ?? false
        config.identity.redirectURI = try value("redirect_uri")
        config.encryption.keys = try value("encryption_keys") ?? ""
        config.encryption.dataKeyCapacity = try int("data_key_capacity", 1...10_000_000) ?? config.encryption.dataKeyCapacity
        config.encryption.dataKeyHoldSeconds = try int("data_key_hold_s", 1...86_400) ?? config.encryption.dataKeyHoldSeconds
        config.encryption.pkcs11 = try Self.pkcs11(
            module: value("pkcs11_module"), tokenLabel: value("pkcs11_token_label"), pin: value("pkcs11_pin"), keyLabels: list("pkcs11_key_label"))
        if let apis = try value("downstream_apis") {
            config.downstream.apis = try Self.parseDownstreamAPIs(apis)
        }
        config.apiKeys.bootstrapKey = try value("bootstrap_api_key")
        if let level = try value("log_level") {
            guard let parsed = LogLevel(rawValue: level.lowercased()) else {
                throw ConfigurationError(setting: "TOKENRELAY_LOG_LEVEL", reason: "must be one of debug, info, warn, error")
            }
            config.logging.level = parsed
        }
        config.logging.pii = try bool("log_pii") ?? false
        if let timeout = try value("request_timeout_s") {
            guard let seconds = Double(timeout), seconds > 0, seconds <= 120 else {
                throw ConfigurationError(setting: "TOKENRELAY_REQUEST_TIMEOUT_S", reason: "must be a number of seconds in (0, 120]")
            }
            config.limits.requestTimeoutSeconds = seconds
        }
        config.tokens.maxAttempts = try int("max_attempts", 1...10) ?? config.tokens.maxAttempts
        config.tokens.maxRetryAfterSeconds = try int("max_retry_after_s", 0...3600) ?? config.tokens.maxRetryAfterSeconds
        config.tokens.expirySkewSeconds = try int("expiry_skew_s", 0...3600) ?? config.tokens.expirySkewSeconds
        config.tokens.uiRequiredTTLSeconds = try int("ui_required_ttl_s", 0...3600) ?? config.tokens.uiRequiredTTLSeconds
        config.tokens.maxConcurrentRefreshes = try int("max_concurrent_refreshes", 1...100_000) ?? config.tokens.maxConcurrentRefreshes
        config.tokens.refreshLeaseSeconds = try int("refresh_lease_s", 2...600) ?? config.tokens.refreshLeaseSeconds
        config.tokens.allowExtendedLifetime = try bool("allow_extended_lifetime") ?? false
        config.identity.clientCapabilities = try list("client_capabilities") ?? []
        config.limits.maxBodyBytes = try int("max_body_bytes", 1024...(64 << 20)) ?? config.limits.maxBodyBytes
        config.limits.maxConnections = try int("max_connections", 1...1_000_000) ?? config.limits.maxConnections
        if let rate = try value("rate_limit_per_key") {
            guard let perSecond = Double(rate.trimmingCharacters(in: .whitespaces)), perSecond >= 0, perSecond <= 1_000_000 else {
                throw ConfigurationError(
                    setting: "TOKENRELAY_RATE_LIMIT_PER_KEY", reason: "must be a number of requests per second in 0...1000000 (0 = no limit)")
            }
            config.limits.rateLimitPerKey = perSecond
        }
        config.http.clientTimeoutSeconds = try int("client_timeout_s", 1...3600) ?? config.http.clientTimeoutSeconds
        config.http.serverThreads = try int("server_threads", 1...256) ?? config.http.serverThreads
        config.database.migrateOnStart = try bool("migrate_on_start") ?? false
        config.http.publicBaseURL = try value("public_base_url")
        config.identity.redirectAfterOrigins = try list("redirect_after_origins") ?? []
        config.database.migrationsDirectory = try value("migrations_dir")
        config.database.listenURL = try value("database_listen_url")
        config.tokens.cacheTTLSeconds = try int("cache_ttl_s", 1...3600) ?? config.tokens.cacheTTLSeconds
        config.tokens.memoryCacheMegabytes = try int("memory_cache_mb", 1...65536) ?? config.tokens.memoryCacheMegabytes
        config.http.shutdownTimeoutSeconds = try int("shutdown_timeout_s", 0...600) ?? config.http.shutdownTimeoutSeconds
        config.keepAlive.afterDays = try int("keepalive_after_days", 0...89) ?? config.keepAlive.afterDays
        config.keepAlive.maxPerMinute = try int("keepalive_max_per_minute", 1...6000) ?? config.keepAlive.maxPerMinute
        config.keepAlive.intervalSeconds = try int("keepalive_interval_s", 60...604_800) ?? config.keepAlive.intervalSeconds
        config.webhooks.url = try value("webhook_url")
        config.webhooks.secret = try value("webhook_secret")
        config.webhooks.maxBackoffSeconds = try int("webhook_max_backoff_s", 1...86400) ?? config.webhooks.maxBackoffSeconds
        config.webhooks.eventsRetentionDays = try int("events_retention_days", 1...3650) ?? config.webhooks.eventsRetentionDays
        config.webhooks.auditRetentionDays = try int("audit_retention_days", 0...3650) ?? config.webhooks.auditRetentionDays
        config.credential.secretExpiresAt = try value("client_secret_expires_at").map(Self.parseClientSecretExpiry)
        config.credential.list = try value("client_credentials").map(Self.parseClientCredentials) ?? []
        config.credential.fallbackHoldSeconds = try int("client_credential_fallback_s", 1...86_400) ?? config.credential.fallbackHoldSeconds
        config.tokens.issuanceFlushIntervalSeconds = try int("issuance_flush_interval_s", 1...3600) ?? config.tokens.issuanceFlushIntervalSeconds
        config.tracing.endpoint = try value("otlp_endpoint")
        config.tracing.serviceName = try value("otlp_service_name") ?? config.tracing.serviceName
        config.tracing.queueSpans = try int("otlp_queue_spans", 16...1_000_000) ?? config.tracing.queueSpans
        config.tracing.intervalMilliseconds = try int("otlp_interval_ms", 100...60_000) ?? config.tracing.intervalMilliseconds
        if let endpoint = config.tracing.endpoint {
            // A collector inside the cluster is commonly plain http (the OTLP/HTTP default port 4318).
            // The base URL `/v1/traces` is appended to (OTLP/HTTP, as OTEL_EXPORTER_OTLP_ENDPOINT):
            // a fragment would swallow that path and a path already ending in it would double it.
            // A host is written plainly: its percent-decoded form (a CR, an LF) is not checked again.
            let authority = endpoint.split(separator: "://", maxSplits: 1).last?.prefix { $0 != "/" } ?? ""
            guard let url = URL(string: endpoint), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), let host = url.host, !host.isEmpty,
                !authority.contains("%"), (url.port ?? 1) > 0, (url.port ?? 1) <= 65_535, url.query == nil, url.fragment == nil, url.user == nil,
                !url.path.hasSuffix("/v1/traces"), !url.path.hasSuffix("/v1/traces/")
            else {
                throw ConfigurationError(
                    setting: "TOKENRELAY_OTLP_ENDPOINT",
                    reason: "must be the collector's base http or https URL (without user, query, fragment or /v1/traces), e.g. http://collector:4318")
            }
        }
        if let url = config.webhooks.url {
            guard url.hasPrefix("https://") || (config.identity.allowHTTPLoopback && Self.isLoopback(url)), URL(string: url) != nil else {
                throw ConfigurationError(
                    setting: "TOKENRELAY_WEBHOOK_URL", reason: "must be an https URL (or loopback http with TOKENRELAY_ALLOW_HTTP_LOOPBACK)")
            }
            guard let secret = config.webhooks.secret, !secret.isEmpty else {
                throw ConfigurationError(setting: "TOKENRELAY_WEBHOOK_SECRET", reason: "is required with TOKENRELAY_WEBHOOK_URL")
            }
        }

        if requireIdentity {
            try validateIdentity(config)
        }
        return config
    }

    private func validateIdentity(_ config: Configuration) throws {
        guard !config.identity.clientId.isEmpty else {
            throw ConfigurationError(setting: "TOKENRELAY_CLIENT_ID", reason: "is required")
        }
        guard !config.identity.authority.isEmpty else {
            throw ConfigurationError(setting: "TOKENRELAY_AUTHORITY", reason: "is required")
        }
        guard !config.database.url.isEmpty else {
            throw ConfigurationError(setting: "TOKENRELAY_DATABASE_URL", reason: "is required")
        }
        do {
            let validator = try AuthorityValidator(
                knownAuthorities: config.identity.knownAuthorities, allowHTTPLoopback: config.identity.allowHTTPLoopback,
                defaultAuthority: config.identity.authority)
            _ = try validator.validate(config.identity.authority)
        } catch {
            throw ConfigurationError(setting: "TOKENRELAY_AUTHORITY", reason: error.detail)
        }
        do {
            _ = try KeyRing(parsing: config.encryption.keys)
        } catch {
            throw ConfigurationError(setting: "TOKENRELAY_ENCRYPTION_KEYS", reason: String(describing: error))
        }
        _ = try ClientCredential(configuration: config)
        for (name, api) in config.downstream.apis
        where !(api.baseURL.hasPrefix("https://") || (config.identity.allowHTTPLoopback && Self.isLoopback(api.baseURL))) {
            throw ConfigurationError(
                setting: "TOKENRELAY_DOWNSTREAM_APIS", reason: "\(name).base_url must be https (or loopback http with TOKENRELAY_ALLOW_HTTP_LOOPBACK)")
        }
    }

    /// The PKCS#11 settings: all four, or none (the key ring stays the key-encryption key).
    package static func pkcs11(module: String?, tokenLabel: String?, pin: String?, keyLabels: [String]?) throws -> Configuration.Encryption.PKCS11? {
        let given: [(String, Bool)] = [
            ("TOKENRELAY_PKCS11_MODULE", module != nil), ("TOKENRELAY_PKCS11_TOKEN_LABEL", tokenLabel != nil),
            ("TOKENRELAY_PKCS11_PIN", pin != nil), ("TOKENRELAY_PKCS11_KEY_LABEL", !(keyLabels ?? []).isEmpty),
        ]
        guard given.contains(where: \.1) else { return nil }
        if let missing = given.first(where: { !$0.1 }) {
            throw ConfigurationError(setting: missing.0, reason: "is required with the other TOKENRELAY_PKCS11_* settings")
        }
        guard let module, let tokenLabel, let pin, let keyLabels else { return nil }
        guard module.hasPrefix("/") else { throw ConfigurationError(setting: "TOKENRELAY_PKCS11_MODULE", reason: "must be an absolute path") }
        return Configuration.Encryption.PKCS11(module: module, tokenLabel: tokenLabel, pin: pin, keyLabels: keyLabels)
    }

    package static func isLoopback(_ url: String) -> Bool {
        ["http://127.0.0.1", "http://localhost", "http://[::1]"].contains { url == $0 || url.hasPrefix($0 + ":") || url.hasPrefix($0 + "/") }
    }

    /// `host:port` (an IPv6 host in brackets) as host and port 0–65535.
    package static func hostAndPort(_ text: String, setting: String) throws -> (host: String, port: Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            throw ConfigurationError(setting: setting, reason: "must be host:port")
        }
        return (String(text[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]")), port)
    }

    private func fileSettings() throws -> [String: String] {
        guard let path = environment["TOKENRELAY_CONFIG"], !path.isEmpty else { return [:] }
        guard let data = FileManager.default.contents(atPath: path),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else {
            throw ConfigurationError(setting: "TOKENRELAY_CONFIG", reason: "cannot read a JSON object from the file")
        }
        // A setting given twice would silently keep one of the two (behaviour §4.5's rule for bodies, applied to settings).
        if let member = DuplicateMembers.first(in: Array(data)) {
            throw ConfigurationError(setting: "TOKENRELAY_CONFIG", reason: "names '\(member)' twice")
        }
        var settings: [String: String] = [:]
        for (key, value) in object {
            switch value {
            case let text as String: settings[key] = text
            case let flag as Bool: settings[key] = flag ? "true" : "false"
            case let number as NSNumber: settings[key] = number.stringValue
            case let list as [String]: settings[key] = list.joined(separator: ",")
            default:
                if let data = try? JSONSerialization.data(withJSONObject: value) {
                    settings[key] = String(decoding: data, as: UTF8.self)
                }
            }
        }
        return settings
    }

    /// `TOKENRELAY_CLIENT_CREDENTIALS`: a JSON array of credentials tried in order, each an object
    /// with exactly one of `secret`, `secret_file`, `certificate` (a PEM file), `assertion_file`,
    /// and `secret_expires_at` (RFC 3339) beside a secret. A `secret_file` is read here (and on SIGHUP).
    package static func parseClientCredentials(_ text: String) throws -> [Configuration.Credential.Entry] {
        let setting = "TOKENRELAY_CLIENT_CREDENTIALS"
        guard let array = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [Any], !array.isEmpty else {
            throw ConfigurationError(
                setting: setting, reason: "must be a non-empty JSON array of objects, each with one of secret, secret_file, certificate, assertion_file")
        }
        let fields = ["secret", "secret_file", "certificate", "assertion_file"]
        return try array.enumerated().map { index, item in
            let name = "entry \(index + 1)"
            guard let object = item as? [String: Any] else { throw ConfigurationError(setting: setting, reason: "\(name) must be an object") }
            if let unknown = object.keys.sorted().first(where: { !(fields + ["secret_expires_at"]).contains($0) }) {
                throw ConfigurationError(setting: setting, reason: "\(name) has an unknown member '\(unknown)'")
            }
            let given = fields.filter { object[$0] != nil }
            guard given.count == 1, let field = given.first else {
                throw ConfigurationError(
                    setting: setting,
                    reason: given.isEmpty
                        ? "\(name) is empty: give one of secret, secret_file, certificate, assertion_file"
                        : "\(name) gives \(given.joined(separator: " and ")); give only one")
            }
            guard let value = object[field] as? String, !value.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw ConfigurationError(setting: setting, reason: "\(name) (\(field)) must be a non-empty string")
            }
            var entry = Configuration.Credential.Entry()
            switch field {
            case "secret": entry.secret = value
            case "secret_file":
                guard let secret = try? String(contentsOfFile: value, encoding: .utf8), !secret.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
                else {
                    throw ConfigurationError(setting: setting, reason: "\(name) (secret_file): cannot read a secret from the file")
                }
                entry.secret = secret.trimmingCharacters(in: .whitespacesAndNewlines)
            case "certificate": entry.certificate = value
            default: entry.assertionFile = value
            }
            if let expires = object["secret_expires_at"] {
                guard entry.secret != nil, let text = expires as? String, let date = try? parseClientSecretExpiry(text) else {
                    throw ConfigurationError(setting: setting, reason: "\(name) (secret_expires_at) must be an RFC 3339 time beside a secret")
                }
                entry.secretExpiresAt = date
            }
            return entry
        }
    }

    package static func parseDownstreamAPIs(_ text: String) throws -> [String: DownstreamAPI] {
        let setting = "TOKENRELAY_DOWNSTREAM_APIS"
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
            throw ConfigurationError(setting: setting, reason: "must be a JSON object {name: {base_url, scopes, app_scopes}}")
        }
        if let member = DuplicateMembers.first(in: Array(text.utf8)) {
            throw ConfigurationError(setting: setting, reason: "names '\(member)' twice")
        }
        var apis: [String: DownstreamAPI] = [:]
        for (name, entry) in object {
            guard let entry = entry as? [String: Any], let base = entry["base_url"] as? String, !base.isEmpty else {
                throw ConfigurationError(setting: setting, reason: "\(name).base_url is required")
            }
            guard let scopes = entry["scopes"] as? [String], !scopes.isEmpty else {
                throw ConfigurationError(setting: setting, reason: "\(name).scopes must be a non-empty array of strings")
            }
            let trimmed = base.hasSuffix("/") ? String(base.dropLast()) : base
            var appScopes: [String]?
            if let value = entry["app_scopes"], !(value is NSNull) {
                guard let list = value as? [String], !list.isEmpty else {
                    throw ConfigurationError(setting: setting, reason: "\(name).app_scopes must be a non-empty array of strings")
                }
                appScopes = list
            }
            // Held at start-up to the rules of a request's scopes: a scope the service would refuse
            // (malformed, too long, two resources) otherwise failed every call to the API with 500.
            for (member, list) in [("scopes", scopes), ("app_scopes", appScopes ?? [])] where !list.isEmpty {
                do {
                    _ = try ScopeRules.requested(scopes: list, resource: nil)
                } catch {
                    throw ConfigurationError(setting: setting, reason: "\(name).\(member): \(error.detail)")
                }
            }
            apis[name] = DownstreamAPI(baseURL: trimmed, scopes: scopes, appScopes: appScopes)
        }
        return apis
    }
}
