import CryptoBridge
import Foundation
import IdentityCore
import Synchronization
import TokenRelayBase

/// The confidential client's credential (behaviour §7, §11) and the one function that turns it into
/// the client-authentication fields of every token request (refresh token, authorization code,
/// client credentials, on-behalf-of).
///
/// - A client secret is sent as `client_secret` (RFC 6749 §2.3.1).
/// - A certificate is sent as a client assertion (RFC 7523 §2.2, identity platform "Microsoft
///   identity platform application authentication certificate credentials"): a JWT signed with
///   the certificate's key, PS256 with header `x5t#S256` (default) or RS256 with `x5t` for older
///   tenants; claims `aud` = the token endpoint URL, `iss` = `sub` = client id, a unique `jti`,
///   `nbf`/`iat` = now, `exp` = now + 10 minutes. A fresh assertion per request: the STS
///   rejects a reused `jti`.
/// - A federated assertion (`TOKENRELAY_CLIENT_ASSERTION_FILE`, e.g. a Kubernetes projected
///   service-account token) is read from its file for every request, so a rotated file is used
///   at once; when a read fails, the last good content is used.
package final class ClientCredential: Sendable {
    /// The JWS algorithm of certificate assertions (`TOKENRELAY_CLIENT_ASSERTION_ALGORITHM`).
    package enum AssertionAlgorithm: String, Sendable {
        /// RSASSA-PSS with SHA-256 and header `x5t#S256`: what current tenants expect.
        case ps256 = "PS256"
        /// RSASSA-PKCS1-v1_5 with SHA-256 and the SHA-1 thumbprint `x5t`: older tenants.
        case rs256 = "RS256"
    }

    package enum Kind: Sendable {
        case none
        case secret(String)
        case certificate(key: RSAPrivateKey, certificate: X509Certificate, algorithm: AssertionAlgorithm)
        case assertionFile(path: String)
    }

    /// One configured credential and what readiness says of it.
    package struct Entry: Sendable {
        package let kind: Kind
        /// When a secret expires (`TOKENRELAY_CLIENT_SECRET_EXPIRES_AT`, `secret_expires_at`); nil otherwise.
        package let secretExpiresAt: Date?

        package init(kind: Kind, secretExpiresAt: Date? = nil) {
            self.kind = kind
            self.secretExpiresAt = secretExpiresAt
        }

        /// What the credential is, for readiness and the metric: "client secret", "client certificate",
        /// "federated assertion", "none".
        package var label: String {
            switch kind {
            case .none: "none"
            case .secret: "client secret"
            case .certificate: "client certificate"
            case .assertionFile: "federated assertion"
            }
        }

        /// The `kind` label of `tokenrelay_client_credential_in_use`.
        package var metricKind: String {
            switch kind {
            case .none: "none"
            case .secret: "secret"
            case .certificate: "certificate"
            case .assertionFile: "assertion_file"
            }
        }

        /// When it stops working, when the service can know: the secret's configured expiry, the
        /// certificate's notAfter. (A federated assertion's `exp` is read from the file: ``assertionExpiry(_:)``.)
        package var expiresAt: Date? {
            switch kind {
            case .secret: secretExpiresAt
            case .certificate(_, let certificate, _): Date(timeIntervalSince1970: TimeInterval(certificate.notAfter))
            case .none, .assertionFile: nil
            }
        }
    }

    /// Which credential serves, and why not the first.
    package struct Selection: Sendable {
        /// Index into ``entries`` of the credential tried first.
        package var preferred = 0
        /// When the first credential is tried first again (a fallback is remembered this long).
        package var preferredUntil: Date?
        /// The last rejection that made the service move on: which entry, the STS codes, when.
        package var lastRejected: (index: Int, stsErrorCodes: [Int], at: Date)?
    }

    package static let assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    /// Lifetime of a certificate assertion, seconds (10 minutes, as MSAL).
    package static let assertionLifetime = 600

    package let clientId: String
    /// Seconds a fallback is remembered (`TOKENRELAY_CLIENT_CREDENTIAL_FALLBACK_S`).
    package let fallbackHoldSeconds: TimeInterval
    /// Replaced by ``reload(from:)`` (SIGHUP, behaviour §11); every token request reads the current one.
    private let current: Mutex<[Entry]>
    /// Per replica (behaviour §12 Health): each replica learns from its own token-endpoint answers,
    /// and the files behind the credentials may differ between replicas during a rollout.
    private let selection = Mutex(Selection())
    /// The last good content of each assertion file, by path.
    private let lastAssertions = Mutex<[String: String]>([:])

    /// The credential tried first now (the only one when one is configured).
    package var kind: Kind { inUse.entry.kind }
    /// Every configured credential, in the order configured.
    package var entries: [Entry] { current.withLock { $0 } }

    package convenience init(clientId: String, kind: Kind) {
        self.init(clientId: clientId, entries: [Entry(kind: kind)])
    }

    package init(clientId: String, entries: [Entry], fallbackHoldSeconds: TimeInterval = 3600) {
        self.clientId = clientId
        self.fallbackHoldSeconds = fallbackHoldSeconds
        current = Mutex(entries.isEmpty ? [Entry(kind: .none)] : entries)
    }

    /// Takes the credentials `configuration` names now (SIGHUP re-reads the secret, certificate
    /// or assertion-file setting, their `_FILE` forms and `TOKENRELAY_CLIENT_CREDENTIALS`); token
    /// requests already sent keep the old one. The first credential is tried first again.
    /// - Throws: `ConfigurationError` naming the setting that cannot be used; the credential in
    ///   use stays.
    package func reload(from configuration: Configuration) throws {
        let fresh = try ClientCredential(configuration: configuration)
        let entries = fresh.entries
        current.withLock { $0 = entries }
        selection.withLock { $0 = Selection() }
    }

    /// The credentials the configuration names: `TOKENRELAY_CLIENT_CREDENTIALS`, or at most one of
    /// secret, certificate, assertion file.
    /// - Throws: `ConfigurationError` naming the setting that cannot be used (and the list entry).
    package convenience init(configuration: Configuration) throws {
        let settings = configuration.credential
        let given = [
            settings.secret.map { _ in "TOKENRELAY_CLIENT_SECRET" },
            settings.certificate.map { _ in "TOKENRELAY_CLIENT_CERTIFICATE" },
            settings.assertionFile.map { _ in "TOKENRELAY_CLIENT_ASSERTION_FILE" },
        ].compactMap { $0 }
        guard given.count <= 1 else {
            throw ConfigurationError(setting: given[1], reason: "set only one client credential (\(given.joined(separator: ", ")) are all set)")
        }
        if !settings.list.isEmpty, let single = given.first {
            throw ConfigurationError(setting: "TOKENRELAY_CLIENT_CREDENTIALS", reason: "set either it or \(single), not both")
        }
        guard let algorithm = AssertionAlgorithm(rawValue: settings.assertionAlgorithm.uppercased()) else {
            throw ConfigurationError(setting: "TOKENRELAY_CLIENT_ASSERTION_ALGORITHM", reason: "must be PS256 or RS256")
        }
        let listSetting = "TOKENRELAY_CLIENT_CREDENTIALS"
        let entries: [Entry]
        if settings.list.isEmpty {
            let single = Configuration.Credential.Entry(
                secret: settings.secret, certificate: settings.certificate, assertionFile: settings.assertionFile, secretExpiresAt: settings.secretExpiresAt)
            entries = [
                try Self.entry(single, algorithm: algorithm, setting: { "TOKENRELAY_CLIENT_" + $0.uppercased() }, describe: { _, reason in reason })
            ]
        } else {
            entries = try settings.list.enumerated().map { index, entry in
                guard [entry.secret, entry.certificate, entry.assertionFile].compactMap({ $0 }).count == 1 else {
                    throw ConfigurationError(
                        setting: listSetting, reason: "entry \(index + 1) must give exactly one of secret, secret_file, certificate, assertion_file")
                }
                return try Self.entry(entry, algorithm: algorithm, setting: { _ in listSetting }, describe: { "entry \(index + 1) (\($0)): " + $1 })
            }
        }
        self.init(clientId: configuration.identity.clientId, entries: entries, fallbackHoldSeconds: TimeInterval(settings.fallbackHoldSeconds))
    }

    /// One configured credential, read and checked.
    /// - Parameters:
    ///   - setting: the setting to name for a field (`certificate`, `assertion_file`).
    ///   - describe: the reason as said for that field.
    private static func entry(
        _ entry: Configuration.Credential.Entry, algorithm: AssertionAlgorithm, setting: (String) -> String,
        describe: (String, String) -> String
    ) throws -> Entry {
        if let secret = entry.secret { return Entry(kind: .secret(secret), secretExpiresAt: entry.secretExpiresAt) }
        if let certificate = entry.certificate {
            let name = setting("certificate")
            func fail(_ reason: String) -> ConfigurationError { ConfigurationError(setting: name, reason: describe("certificate", reason)) }
            // The setting names a PEM file; `_FILE` (or a value starting with a PEM line) gives the PEM itself.
            let pem: String
            if certificate.hasPrefix("-----BEGIN") {
                pem = certificate
            } else {
                guard let text = try? String(contentsOfFile: certificate, encoding: .utf8) else { throw fail("cannot read the PEM file") }
                pem = text
            }
            let key: RSAPrivateKey
            let parsed: X509Certificate
            do { key = try RSAPrivateKey(pem: pem) } catch { throw fail("the PEM holds no unencrypted RSA private key") }
            do { parsed = try X509Certificate(pem: pem) } catch { throw fail("the PEM holds no RSA certificate") }
            guard parsed.publicKey == key.publicKey else { throw fail("the private key does not belong to the certificate") }
            return Entry(kind: .certificate(key: key, certificate: parsed, algorithm: algorithm))
        }
        if let path = entry.assertionFile {
            guard FileManager.default.isReadableFile(atPath: path) else {
                throw ConfigurationError(setting: setting("assertion_file"), reason: describe("assertion_file", "cannot read the file"))
            }
            return Entry(kind: .assertionFile(path: path))
        }
        return Entry(kind: .none)
    }

    /// When the certificate stops being valid (unix seconds), for the readiness warning; nil
    /// for other credentials.
    package var certificateNotAfter: Int? {
        if case .certificate(_, let certificate, _) = kind { return certificate.notAfter }
        return nil
    }

    /// The credential tried first at `now` (the first configured once a fallback's hold has passed).
    package func inUse(at now: Date = Date()) -> (index: Int, entry: Entry) {
        let entries = self.entries
        let index = selection.withLock { selection -> Int in
            guard let until = selection.preferredUntil, until > now, selection.preferred < entries.count else { return 0 }
            return selection.preferred
        }
        return (index, entries[index])
    }

    package var inUse: (index: Int, entry: Entry) { inUse(at: Date()) }

    /// The last rejection that moved the service off a credential, while a later one is in use.
    package var lastRejected: (index: Int, stsErrorCodes: [Int], at: Date)? { selection.withLock { $0.lastRejected } }

    /// The order one token request tries the credentials in: the one in use, then the others as configured.
    package func attemptOrder(at now: Date) -> [Int] {
        let first = inUse(at: now).index
        return [first] + entries.indices.filter { $0 != first }
    }

    /// Notes that the STS rejected credential `index` (and the request moves on to another).
    package func rejected(_ index: Int, stsErrorCodes: [Int], at now: Date) {
        selection.withLock { $0.lastRejected = (index, stsErrorCodes, now) }
    }

    /// Notes that the STS accepted credential `index`: a later credential stays first for
    /// ``fallbackHoldSeconds``; the first clears the fallback.
    package func accepted(_ index: Int, at now: Date) {
        selection.withLock { selection in
            if index == 0 {
                selection = Selection()
            } else if selection.preferred != index || (selection.preferredUntil ?? .distantPast) <= now {
                selection.preferred = index
                selection.preferredUntil = now.addingTimeInterval(fallbackHoldSeconds)
            }
        }
    }

    /// The `exp` of the federated assertion in `path` (the file now, else its last good content):
    /// unix seconds (an RFC 7519 NumericDate, a fraction rounded down), nil when no JWT with a
    /// numeric `exp` can be read.
    package func assertionExpiry(_ path: String) -> Int? {
        let read = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let jwt = (read?.isEmpty == false ? read : nil) ?? lastAssertions.withLock({ $0[path] }) else { return nil }
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = CryptoBridge.Base64URL.decode(String(parts[1])), let claims = JSONValue.parse(payload) else { return nil }
        return claims["exp"]?.numericDate
    }

    /// The client-authentication form fields for one token request.
    /// - Parameters:
    ///   - tokenEndpoint: the URL the request goes to (the assertion's `aud`).
    ///   - now: unix seconds.
    /// - Returns: `client_secret`, or `client_assertion_type` and `client_assertion`; nothing
    ///   for a public client.
    /// - Throws: `RelayError` 502 `upstream_error` when the certificate cannot sign or the assertion
    ///   file was never readable (the service's own credential is at fault, behaviour §4).
    package func formFields(tokenEndpoint: String, now: Int) throws(RelayError) -> [(String, String)] {
        try formFields(of: inUse(at: Date(timeIntervalSince1970: TimeInterval(now))).entry.kind, tokenEndpoint: tokenEndpoint, now: now)
    }

    /// The client-authentication form fields of credential `index` (``attemptOrder(at:)``).
    package func formFields(at index: Int, tokenEndpoint: String, now: Int) throws(RelayError) -> [(String, String)] {
        let entries = self.entries
        return try formFields(of: entries[min(index, entries.count - 1)].kind, tokenEndpoint: tokenEndpoint, now: now)
    }

    private func formFields(of kind: Kind, tokenEndpoint: String, now: Int) throws(RelayError) -> [(String, String)] {
        switch kind {
        case .none:
            return []
        case .secret(let secret):
            return [("client_secret", secret)]
        case .certificate(let key, let certificate, let algorithm):
            do {
                return [("client_assertion_type", Self.assertionType), ("client_assertion", try assertion(key, certificate, algorithm, tokenEndpoint, now))]
            } catch {
                throw RelayError(.upstreamError, "The client certificate could not sign a client assertion.", status: 502)
            }
        case .assertionFile(let path):
            let read = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
            let assertion = lastAssertions.withLock { last -> String? in
                if let read, !read.isEmpty { last[path] = read }
                return last[path]
            }
            guard let assertion else {
                throw RelayError(.upstreamError, "The client assertion file (TOKENRELAY_CLIENT_ASSERTION_FILE) cannot be read.", status: 502)
            }
            return [("client_assertion_type", Self.assertionType), ("client_assertion", assertion)]
        }
    }

    /// A signed client assertion (RFC 7523 §3, RFC 7515 §4.1.7–8).
    private func assertion(
        _ key: RSAPrivateKey, _ certificate: X509Certificate, _ algorithm: AssertionAlgorithm, _ audience: String, _ now: Int
    ) throws -> String {
        let header: JSONValue =
            switch algorithm {
            case .ps256: .object(["alg": .string("PS256"), "typ": .string("JWT"), "x5t#S256": .string(certificate.sha256Thumbprint)])
            case .rs256: .object(["alg": .string("RS256"), "typ": .string("JWT"), "x5t": .string(certificate.sha1Thumbprint)])
            }
        let claims: JSONValue = .object([
            "aud": .string(audience), "iss": .string(clientId), "sub": .string(clientId), "jti": .string(UUID().uuidString.lowercased()),
            "nbf": .number(Double(now)), "iat": .number(Double(now)), "exp": .number(Double(now + Self.assertionLifetime)),
        ])
        let input = CryptoBridge.Base64URL.encode(JSONWriter.encode(header)) + "." + CryptoBridge.Base64URL.encode(JSONWriter.encode(claims))
        let signature = try key.sign(Array(input.utf8), algorithm: algorithm == .ps256 ? .ps256 : .rs256)
        return input + "." + CryptoBridge.Base64URL.encode(signature)
    }
}
