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

    package static let assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    /// Lifetime of a certificate assertion, seconds (10 minutes, as MSAL).
    package static let assertionLifetime = 600

    package let clientId: String
    /// Replaced by ``reload(from:)`` (SIGHUP, behaviour §11); every token request reads the current one.
    private let current: Mutex<Kind>
    private let lastAssertion = Mutex<String?>(nil)

    package var kind: Kind { current.withLock { $0 } }

    package init(clientId: String, kind: Kind) {
        self.clientId = clientId
        current = Mutex(kind)
    }

    /// Takes the credential `configuration` names now (SIGHUP re-reads the secret, certificate
    /// or assertion-file setting and their `_FILE` forms); token requests already sent keep
    /// the old one.
    /// - Throws: `ConfigurationError` naming the setting that cannot be used; the credential in
    ///   use stays.
    package func reload(from configuration: Configuration) throws {
        let fresh = try ClientCredential(configuration: configuration)
        let kind = fresh.kind
        current.withLock { $0 = kind }
    }

    /// The credential the configuration names: at most one of secret, certificate, assertion file.
    /// - Throws: `ConfigurationError` naming the setting that cannot be used.
    package convenience init(configuration: Configuration) throws {
        let given = [
            configuration.credential.secret.map { _ in "TOKENRELAY_CLIENT_SECRET" },
            configuration.credential.certificate.map { _ in "TOKENRELAY_CLIENT_CERTIFICATE" },
            configuration.credential.assertionFile.map { _ in "TOKENRELAY_CLIENT_ASSERTION_FILE" },
        ].compactMap { $0 }
        guard given.count <= 1 else {
            throw ConfigurationError(setting: given[1], reason: "set only one client credential (\(given.joined(separator: ", ")) are all set)")
        }
        guard let algorithm = AssertionAlgorithm(rawValue: configuration.credential.assertionAlgorithm.uppercased()) else {
            throw ConfigurationError(setting: "TOKENRELAY_CLIENT_ASSERTION_ALGORITHM", reason: "must be PS256 or RS256")
        }
        if let secret = configuration.credential.secret {
            self.init(clientId: configuration.identity.clientId, kind: .secret(secret))
        } else if let certificate = configuration.credential.certificate {
            let setting = "TOKENRELAY_CLIENT_CERTIFICATE"
            // The setting names a PEM file; `_FILE` (or a value starting with a PEM line) gives the PEM itself.
            let pem: String
            if certificate.hasPrefix("-----BEGIN") {
                pem = certificate
            } else {
                guard let text = try? String(contentsOfFile: certificate, encoding: .utf8) else {
                    throw ConfigurationError(setting: setting, reason: "cannot read the PEM file")
                }
                pem = text
            }
            let key: RSAPrivateKey
            let parsed: X509Certificate
            do { key = try RSAPrivateKey(pem: pem) } catch {
                throw ConfigurationError(setting: setting, reason: "the PEM holds no unencrypted RSA private key")
            }
            do { parsed = try X509Certificate(pem: pem) } catch {
                throw ConfigurationError(setting: setting, reason: "the PEM holds no RSA certificate")
            }
            guard parsed.publicKey == key.publicKey else {
                throw ConfigurationError(setting: setting, reason: "the private key does not belong to the certificate")
            }
            self.init(clientId: configuration.identity.clientId, kind: .certificate(key: key, certificate: parsed, algorithm: algorithm))
        } else if let path = configuration.credential.assertionFile {
            guard FileManager.default.isReadableFile(atPath: path) else {
                throw ConfigurationError(setting: "TOKENRELAY_CLIENT_ASSERTION_FILE", reason: "cannot read the file")
            }
            self.init(clientId: configuration.identity.clientId, kind: .assertionFile(path: path))
        } else {
            self.init(clientId: configuration.identity.clientId, kind: .none)
        }
    }

    /// When the certificate stops being valid (unix seconds), for the readiness warning; nil
    /// for other credentials.
    package var certificateNotAfter: Int? {
        if case .certificate(_, let certificate, _) = kind { return certificate.notAfter }
        return nil
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
            let assertion = lastAssertion.withLock { last -> String? in
                if let read, !read.isEmpty { last = read }
                return last
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
