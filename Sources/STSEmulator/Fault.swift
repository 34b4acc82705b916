/// A failure injected through `POST /_control/faults`, consumed first-in first-out by the
/// matching requests.
///
/// Body (all but `endpoint` optional): `{"endpoint": "token"|"graph"|"authorize"|"keys",
/// "username": "alice@contoso.example", "count": 1, "status": 429, "retry_after": "5" | HTTP-date,
/// "body": "raw text", "error": "invalid_grant", "error_description": "text after the code",
/// "error_codes": [700082], "suberror": "bad_token", "claims_challenge": "{\"access_token\":...}",
/// "latency_ms": 250, "b2c": true, "claims_encoding": "json"|"base64"|"object"}`.
/// `b2c` writes the Azure AD B2C body (code only in `error_description`, case 08) whatever the
/// authority; `claims_encoding` chooses how a token error carries `claims_challenge` (JSON text,
/// base64 of it, or an inline object). `keys` (the signing keys, `/discovery/v2.0/keys`) answers
/// the fault's `status` (default 503) and `body`, for every authority.
struct Fault: Sendable {
    enum Endpoint: String, Sendable { case token, graph, authorize, keys }

    var endpoint: Endpoint
    /// Only requests for this user (case-insensitive) match; nil matches every request.
    var username: String?
    /// How many more requests it fires for.
    var remaining: Int
    var status: Int?
    /// `Retry-After` value, sent verbatim (delta-seconds or an HTTP-date).
    var retryAfter: String?
    /// A raw body, sent as it is (JSON when it parses as JSON, else with no Content-Type, as case 10).
    var body: String?
    var error: String?
    var errorDescription: String?
    var errorCodes: [Int]
    var suberror: String?
    /// A JSON claims request: Graph answers 401 insufficient_claims with it; the token endpoint
    /// answers interaction_required carrying it in `claims`.
    var claimsChallenge: String?
    /// Delay before answering (milliseconds).
    var latencyMs: Int
    /// Write the B2C error shape even for an Entra authority.
    var b2c = false
    /// `json` (default), `base64` or `object`.
    var claimsEncoding = "json"

    /// True when the fault only delays and the request then proceeds normally.
    var isLatencyOnly: Bool {
        status == nil && body == nil && error == nil && errorCodes.isEmpty && claimsChallenge == nil && retryAfter == nil
            && suberror == nil
    }

    /// Reads a control request body.
    /// - Returns: nil with a reason when the body is not a fault.
    static func decode(_ value: JSONValue) -> Result<Fault, EmulatorConfigurationError> {
        guard let endpointName = value["endpoint"]?.stringValue, let endpoint = Endpoint(rawValue: endpointName) else {
            return .failure(EmulatorConfigurationError("\"endpoint\" must be token, graph, authorize or keys"))
        }
        let count = value["count"]?.intValue ?? 1
        guard count >= 1 else { return .failure(EmulatorConfigurationError("\"count\" must be at least 1")) }
        var retryAfter = value["retry_after"]?.stringValue
        if retryAfter == nil, let seconds = value["retry_after"]?.intValue { retryAfter = String(seconds) }
        var claims = value["claims_challenge"]?.stringValue
        if claims == nil, let object = value["claims_challenge"], case .object = object { claims = object.serialized }
        var body = value["body"]?.stringValue
        if body == nil, let object = value["body"], object != .null { body = object.serialized }
        let encoding = value["claims_encoding"]?.stringValue ?? "json"
        guard ["json", "base64", "object"].contains(encoding) else {
            return .failure(EmulatorConfigurationError("\"claims_encoding\" must be json, base64 or object"))
        }
        return .success(
            Fault(
                endpoint: endpoint, username: value["username"]?.stringValue, remaining: count, status: value["status"]?.intValue,
                retryAfter: retryAfter, body: body, error: value["error"]?.stringValue,
                errorDescription: value["error_description"]?.stringValue,
                errorCodes: (value["error_codes"]?.arrayValue ?? []).compactMap(\.intValue), suberror: value["suberror"]?.stringValue,
                claimsChallenge: claims, latencyMs: value["latency_ms"]?.intValue ?? 0, b2c: value["b2c"]?.boolValue ?? false,
                claimsEncoding: encoding))
    }
}
