/// What one token request asked for, without its secrets (no code, refresh token, assertion or
/// client credential): `GET /_control/token-requests` lists the newest ones, so tests can check
/// the parameters TokenRelay sent, e.g. the `claims` of an authorization-code redemption
/// (identity platform "Claims challenges, claims requests, and client capabilities": every token
/// request of a CAE-capable client carries `xms_cc`).
struct TokenRequestRecord: Sendable {
    /// At most this many are kept, the newest last.
    static let capacity = 500

    var grantType: String
    /// The user the grant is for, when the emulator can tell.
    var username: String?
    var scope: String?
    /// The `claims` parameter as sent (JSON text), nil when absent.
    var claims: String?
    /// The W3C `traceparent` header as received, nil when absent (tests check that TokenRelay sends
    /// its own span's id, behaviour §8.11).
    var traceparent: String?

    var json: JSONValue {
        .object([
            ("grant_type", .string(grantType)), ("username", username.map(JSONValue.string) ?? .null),
            ("scope", scope.map(JSONValue.string) ?? .null), ("claims", claims.map(JSONValue.string) ?? .null),
            ("traceparent", traceparent.map(JSONValue.string) ?? .null),
        ])
    }
}
