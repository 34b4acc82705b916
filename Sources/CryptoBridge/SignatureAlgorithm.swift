/// JWS signature algorithms the bridge implements (RFC 7518 §3.3 and §3.5).
public enum SignatureAlgorithm: String, Sendable {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    case rs256 = "RS256"
    /// RSASSA-PSS with SHA-256, MGF1 with SHA-256 and a 32-byte salt (RFC 7518 §3.5).
    case ps256 = "PS256"
}
