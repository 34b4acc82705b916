/// Per-user behaviour set through `POST /_control/users/{username}`; every field optional.
///
/// `{"expires_in": 3600, "ext_expires_in": 3600, "refresh_in": 1800, "omit_refresh_token": false,
/// "declined_scopes": ["User.ReadBasic.All"], "consent_required_scopes": ["Calendars.ReadWrite"],
/// "consented_scopes": ["Mail.Send"],
/// "revoke_refresh_tokens": true, "decline_consent": false, "latency_ms": 0, "numbers_as_strings": false,
/// "foci": "1"}`.
/// `expires_in`/`refresh_in` make "after expiry" testable without sleeping (behaviour §12).
struct UserControls: Sendable {
    /// Access-token lifetime (seconds); nil: the configured default (3600).
    var expiresIn: Int?
    /// `ext_expires_in` (seconds); nil: equal to `expires_in`.
    var extExpiresIn: Int?
    /// `refresh_in` (seconds); sent only when set.
    var refreshIn: Int?
    /// Answer token requests without a `refresh_token` (case 14).
    var omitRefreshToken = false
    /// Permissions never granted: the response's `scope` leaves them out (case 16).
    var declinedScopes: [String] = []
    /// Permissions consented earlier: granted with every request for Graph though not asked for, as
    /// the platform grants a resource's consented permissions together (the response's `scope` may
    /// differ from the request's, RFC 6749 §5.1).
    var consentedScopes: [String] = []
    /// Permissions not consented: refresh requests naming one answer AADSTS65001 (case 06)
    /// until an authorize request names it.
    var consentRequiredScopes: [String] = []
    /// Authorize answers access_denied AADSTS65004.
    var declineConsent = false
    /// Delay before every token, Graph and authorize answer for this user (milliseconds).
    var latencyMs = 0
    /// Send `expires_in`, `ext_expires_in` and `refresh_in` as digit strings (behaviour §5).
    var numbersAsStrings = false
    /// `foci` sent with each refresh token (a family refresh token, case 13); nil: none.
    var familyID: String?

    /// Applies a control body; `revoke_refresh_tokens` is handled by the caller.
    mutating func apply(_ value: JSONValue) {
        func names(_ key: String) -> [String]? {
            value[key]?.arrayValue.map { $0.compactMap(\.stringValue).map { RequestedScopes.split($0).permission } }
        }
        if let v = value["expires_in"] { expiresIn = v.intValue }
        if let v = value["ext_expires_in"] { extExpiresIn = v.intValue }
        if let v = value["refresh_in"] { refreshIn = v.intValue }
        if let v = value["omit_refresh_token"]?.boolValue { omitRefreshToken = v }
        if let v = names("declined_scopes") { declinedScopes = v }
        if let v = names("consent_required_scopes") { consentRequiredScopes = v }
        if let v = names("consented_scopes") { consentedScopes = v }
        if let v = value["decline_consent"]?.boolValue { declineConsent = v }
        if let v = value["latency_ms"]?.intValue { latencyMs = v }
        if let v = value["numbers_as_strings"]?.boolValue { numbersAsStrings = v }
        if let v = value["foci"] { familyID = v.stringValue }
    }

    var json: JSONValue {
        [
            "expires_in": expiresIn.map(JSONValue.int) ?? .null, "ext_expires_in": extExpiresIn.map(JSONValue.int) ?? .null,
            "refresh_in": refreshIn.map(JSONValue.int) ?? .null, "omit_refresh_token": .bool(omitRefreshToken),
            "declined_scopes": .array(declinedScopes.map(JSONValue.string)),
            "consent_required_scopes": .array(consentRequiredScopes.map(JSONValue.string)), "decline_consent": .bool(declineConsent),
            "consented_scopes": .array(consentedScopes.map(JSONValue.string)),
            "latency_ms": .int(latencyMs), "numbers_as_strings": .bool(numbersAsStrings), "foci": familyID.map(JSONValue.string) ?? .null,
        ]
    }
}
