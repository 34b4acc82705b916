import CryptoBridge
import Foundation

/// The emulator's RS256 token-signing key and the JWTs it writes and checks.
///
/// One RSA-2048 key is generated at start; `kid` is the base64url SHA-256 of the modulus, cut
/// to 27 characters (the platform's kids are opaque strings of about that length).
/// Source: RFC 7515 (JWS compact serialisation), RFC 7517 (JWK), RFC 7518 §3.3 (RS256).
final class SigningKey: Sendable {
    let privateKey: RSAPrivateKey
    let kid: String

    /// - Throws: whatever key generation throws.
    init() throws {
        privateKey = try RSAPrivateKey.generate(bits: 2048)
        kid = String(Base64URLText.encode(SHA256.hash(privateKey.publicKey.modulus)).prefix(27))
    }

    /// The JWK of the public key, as `/discovery/v2.0/keys` lists it.
    var jwk: JSONValue {
        let publicKey = privateKey.publicKey
        return [
            "kty": "RSA", "use": "sig", "kid": .string(kid),
            "n": .string(Base64URLText.encode(publicKey.modulus)), "e": .string(Base64URLText.encode(publicKey.exponent)),
            "alg": "RS256",
        ]
    }

    /// Signs `claims` as a compact JWS.
    /// - Throws: whatever signing throws.
    func makeJWT(claims: JSONValue) throws -> String {
        let header: JSONValue = ["typ": "JWT", "alg": "RS256", "kid": .string(kid)]
        let signingInput = Base64URLText.encode(header.bytes) + "." + Base64URLText.encode(claims.bytes)
        let signature = try privateKey.sign(Array(signingInput.utf8), algorithm: .rs256)
        return signingInput + "." + Base64URLText.encode(signature)
    }

    /// The claims of a JWT this key signed, or nil when it is malformed, signed with another key
    /// or algorithm, or its signature does not verify. Expiry is the caller's business.
    func verifiedClaims(of token: String) -> JSONValue? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URLText.decode(String(parts[0])),
            let header = JSONValue.parse(headerBytes), header["alg"]?.stringValue == "RS256",
            header["kid"]?.stringValue == kid,
            let payloadBytes = Base64URLText.decode(String(parts[1])), let claims = JSONValue.parse(payloadBytes),
            let signature = Base64URLText.decode(String(parts[2]))
        else { return nil }
        let signingInput = Array((parts[0] + "." + parts[1]).utf8)
        guard privateKey.publicKey.verify(signature: signature, for: signingInput, algorithm: .rs256) else { return nil }
        return claims
    }
}

/// Base64url without padding (RFC 4648 §5), kept local so the emulator shares no encoding code
/// with the service it tests.
enum Base64URLText {
    static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Decodes with or without padding; nil for characters outside the alphabet.
    static func decode(_ text: String) -> [UInt8]? {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        if standard.contains("=") { standard = standard.replacingOccurrences(of: "=", with: "") }
        standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
        return Data(base64Encoded: standard).map(Array.init)
    }
}
