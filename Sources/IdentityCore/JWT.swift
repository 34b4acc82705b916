import Foundation

/// A compact-serialised JWS (RFC 7515 §7.1) split into its parts; the signature is checked
/// by a `JWTSignatureVerifier` (the crypto bridge), never here.
public struct JWT: Sendable {
    /// The JOSE header.
    public let header: [String: JSONValue]
    /// The payload's claims.
    public let claims: [String: JSONValue]
    /// ASCII bytes of `base64url(header) "." base64url(payload)` (RFC 7515 §5.2).
    public let signingInput: [UInt8]
    /// The decoded signature bytes.
    public let signature: [UInt8]

    /// The `alg` header parameter.
    public var algorithm: String? { header["alg"]?.stringValue }
    /// The `kid` header parameter.
    public var keyId: String? { header["kid"]?.stringValue }

    /// Splits and decodes a compact JWS.
    /// - Parameter compact: `header.payload.signature`, base64url without padding.
    /// - Returns: the parsed token (signature not verified).
    /// - Throws: `JWTError` when it is not three base64url parts of JSON objects.
    public static func parse(_ compact: String) throws(JWTError) -> JWT {
        let parts = compact.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw JWTError(detail: "a JWS has three dot-separated parts") }
        guard let headerBytes = Base64URL.decode(String(parts[0])),
            let header = JSONValue.parse(headerBytes)?.objectValue
        else { throw JWTError(detail: "JWT header is not base64url JSON") }
        guard let payloadBytes = Base64URL.decode(String(parts[1])),
            let claims = JSONValue.parse(payloadBytes)?.objectValue
        else { throw JWTError(detail: "JWT payload is not base64url JSON") }
        guard let signature = Base64URL.decode(String(parts[2])) else { throw JWTError(detail: "JWT signature is not base64url") }
        return JWT(
            header: header, claims: claims,
            signingInput: Array("\(parts[0]).\(parts[1])".utf8), signature: signature)
    }
}

/// A token that is not a well-formed JWS. `detail` never contains token text.
public struct JWTError: Error, Sendable, Equatable, CustomStringConvertible {
    public let detail: String
    public var description: String { "malformed JWT: \(detail)" }
}

/// Verifies a JWS signature against the authority's signing keys (JWKS); implemented by the
/// application over the crypto bridge.
public protocol JWTSignatureVerifier: Sendable {
    /// - Parameters:
    ///   - algorithm: the header's `alg` (RS256 or PS256 reach this call).
    ///   - keyId: the header's `kid`.
    ///   - signingInput: bytes that were signed.
    ///   - signature: the signature bytes.
    /// - Returns: true when a known key of the issuer verifies the signature.
    func verify(algorithm: String, keyId: String?, signingInput: [UInt8], signature: [UInt8]) -> Bool
}
