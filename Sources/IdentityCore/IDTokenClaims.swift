/// The standard claims of a validated id_token (OpenID Connect Core §2; Microsoft identity
/// platform "ID token claims reference").
public struct IDTokenClaims: Sendable {
    /// Object id of the user in the token's tenant.
    public let oid: String?
    /// Tenant id (the realm).
    public let tid: String?
    public let sub: String?
    public let preferredUsername: String?
    public let name: String?
    /// B2C sends `emails` (an array) instead of `preferred_username`; without it, the
    /// `email` claim when present.
    public let emails: [String]
    public let issuer: String?
    /// All audiences (`aud` may be a string or an array).
    public let audiences: [String]
    public let nonce: String?
    /// `exp`, unix seconds.
    public let expiresAt: Int?
    /// `iat`, unix seconds.
    public let issuedAt: Int?
    /// `nbf`, unix seconds.
    public let notBefore: Int?
    /// Every claim as sent.
    public let all: [String: JSONValue]

    /// The first (usually only) audience.
    public var audience: String? { audiences.first }

    /// `preferred_username`, else (B2C) the first of `emails` (behaviour §12 "Accounts").
    public var username: String? {
        if let preferredUsername, !preferredUsername.isEmpty { return preferredUsername }
        return emails.first
    }

    public init(_ claims: [String: JSONValue]) {
        all = claims
        oid = claims["oid"]?.stringValue
        tid = claims["tid"]?.stringValue
        sub = claims["sub"]?.stringValue
        preferredUsername = claims["preferred_username"]?.stringValue
        name = claims["name"]?.stringValue
        emails = claims["emails"]?.arrayValue?.compactMap(\.stringValue) ?? claims["email"]?.stringValue.map { [$0] } ?? []
        issuer = claims["iss"]?.stringValue
        if let list = claims["aud"]?.arrayValue {
            audiences = list.compactMap(\.stringValue)
        } else {
            audiences = claims["aud"]?.stringValue.map { [$0] } ?? []
        }
        nonce = claims["nonce"]?.stringValue
        expiresAt = claims["exp"]?.numericDate
        issuedAt = claims["iat"]?.numericDate
        notBefore = claims["nbf"]?.numericDate
    }
}
