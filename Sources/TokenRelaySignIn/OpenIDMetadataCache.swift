import CryptoBridge
import Foundation
import HTTPClientBridge
import IdentityCore
import TokenRelayBase

/// The parts of an authority's OpenID Connect discovery document TokenRelay uses
/// (OpenID Connect Discovery 1.0 §3).
package struct OpenIDMetadata: Sendable {
    package let issuer: String
    package let jwksURI: String
}

/// Discovery documents and signing keys per authority, fetched on first use and kept for an
/// hour; an unknown `kid` refetches the keys once (key rollover, identity-platform "Signing key
/// rollover"). At most `capacity` authorities are kept (the soonest to expire, i.e. the oldest
/// fetched, make room: ``ExpiringMap``); one that made room is fetched again when next used.
package final class OpenIDMetadataCache: Sendable {
    private struct Entry {
        var metadata: OpenIDMetadata
        var keys: [String: RSAPublicKey]
    }

    private let http: HTTPClient
    private let clock: RelayClock
    /// Authority URL → documents, on the clock's Unix time.
    private let entries: ExpiringMap<String, Entry>
    private static let lifetime: TimeInterval = 3600

    /// - Parameters:
    ///   - capacity: most authorities kept; a bound on memory (sign-ins may name any
    ///     tenant the authority rules allow). Default 1,000.
    ///   - clock: the service's clock, for the documents' lifetime. Default the system's.
    package init(http: HTTPClient, capacity: Int = 1_000, clock: RelayClock = .system) {
        self.http = http
        self.clock = clock
        entries = ExpiringMap(capacity: capacity)
    }

    /// The metadata and a signature verifier for `authority`.
    /// - Throws: `RelayError` 503 when the documents cannot be fetched or the authority answers
    ///   5xx or 429, 502 when they cannot be read.
    package func verifier(for authority: Authority, keyId: String?) async throws -> (OpenIDMetadata, JWKSVerifier) {
        if let entry = entries.value(for: authority.url, now: clock.unixTime), keyId.map({ entry.keys[$0] != nil }) ?? true {
            return (entry.metadata, JWKSVerifier(keys: entry.keys))
        }
        let metadata = try await fetchMetadata(authority)
        let keys = try await fetchKeys(metadata.jwksURI)
        let fetched = clock.unixTime
        entries.set(Entry(metadata: metadata, keys: keys), for: authority.url, expiresAt: fetched + Self.lifetime, now: fetched)
        return (metadata, JWKSVerifier(keys: keys))
    }

    private func fetchJSON(_ url: String, what: String) async throws -> [String: Any] {
        let response: HTTPClientResponse
        do {
            response = try await http.execute(HTTPClientRequest(method: "GET", url: url, headers: ["Accept": "application/json"], timeout: 10))
        } catch {
            throw RelayError.unavailable("The authority's \(what) could not be fetched.", retryAfterSeconds: 2)
        }
        // The authority busy or down is for a while, as its token endpoint's 5xx and 429 are.
        if response.status >= 500 || response.status == 429 {
            throw RelayError.unavailable("The authority's \(what) answered status \(response.status).", retryAfterSeconds: 2)
        }
        guard response.status == 200, let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any] else {
            throw RelayError(.upstreamError, "The authority's \(what) answered status \(response.status) or was not JSON.", status: 502)
        }
        return object
    }

    private func fetchMetadata(_ authority: Authority) async throws -> OpenIDMetadata {
        let object = try await fetchJSON(authority.discoveryEndpoint, what: "discovery document")
        guard let issuer = object["issuer"] as? String, let jwks = object["jwks_uri"] as? String else {
            throw RelayError(.upstreamError, "The authority's discovery document lacks issuer or jwks_uri.", status: 502)
        }
        return OpenIDMetadata(issuer: issuer, jwksURI: jwks)
    }

    private func fetchKeys(_ url: String) async throws -> [String: RSAPublicKey] {
        let object = try await fetchJSON(url, what: "signing keys")
        var keys: [String: RSAPublicKey] = [:]
        for key in object["keys"] as? [[String: Any]] ?? [] {
            guard key["kty"] as? String == "RSA", let kid = key["kid"] as? String, let n = key["n"] as? String, let e = key["e"] as? String,
                let modulus = Base64URL.decode(n), let exponent = Base64URL.decode(e), let publicKey = try? RSAPublicKey(modulus: modulus, exponent: exponent)
            else { continue }
            keys[kid] = publicKey
        }
        return keys
    }
}

/// Verifies JWT signatures with an authority's JWKS keys (RFC 7517, RFC 7518 §3.3 RS256, §3.5 PS256).
package struct JWKSVerifier: JWTSignatureVerifier {
    package let keys: [String: RSAPublicKey]

    package func verify(algorithm: String, keyId: String?, signingInput: [UInt8], signature: [UInt8]) -> Bool {
        guard let algorithm = SignatureAlgorithm(rawValue: algorithm) else { return false }
        let candidates = keyId.map { keys[$0].map { [$0] } ?? [] } ?? Array(keys.values)
        return candidates.contains { $0.verify(signature: signature, for: signingInput, algorithm: algorithm) }
    }
}
