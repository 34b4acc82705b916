import Foundation
import HTTPCommon

/// An error answer of the token (or authorize) endpoint, in the platform's wire shape.
///
/// Entra ID bodies carry `error`, `error_description` ("AADSTSnnnn: text Trace ID: ...
/// Correlation ID: ... Timestamp: ..."), `error_codes`, `timestamp`, `trace_id`, `correlation_id`,
/// `error_uri` (for most codes) and `suberror` (when set); B2C bodies carry only `error` and
/// `error_description` ("AADB2Cnnnnn: text\r\nCorrelation ID: ...\r\nTimestamp: ...").
/// Texts and separators follow `cases/` 01, 02, 05, 06, 08, 09, 11; other texts are the
/// platform's documented messages (learn.microsoft.com, "Microsoft Entra authentication and
/// authorization error codes"; "Azure AD B2C error codes").
struct STSError: Error, Sendable {
    var status: Int
    var error: String
    var code: Int
    /// The text after "AADSTSnnnn: ".
    var message: String
    var suberror: String?
    var includesErrorURI = true
    /// What precedes "Trace ID:": the 2019–2023 bodies of cases 05/06/09/11 use CRLF, newer
    /// ones (01/02) a space.
    var separator = " "
    /// A claims request (JSON text) for interaction_required answers.
    var claims: String?
    /// How `claims` is written: `json` (JSON text in a string), `base64` (of that text), `object`.
    var claimsEncoding = "json"
    /// Extra headers (e.g. Retry-After).
    var headers: [(String, String)] = []

    // MARK: Known codes

    static func invalidClientSecret(clientID: String) -> STSError {
        STSError(
            status: 401, error: "invalid_client", code: 7000215,
            message:
                "Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app '\(clientID)'.",
            separator: "\r\n")
    }

    static func missingClientSecret() -> STSError {
        STSError(
            status: 401, error: "invalid_client", code: 7000218,
            message: "The request body must contain the following parameter: 'client_assertion' or 'client_secret'.")
    }

    static func unknownClient(_ clientID: String, tenant: String) -> STSError {
        STSError(
            status: 400, error: "unauthorized_client", code: 700016,
            message:
                "Application with identifier '\(clientID)' was not found in the directory '\(tenant)'. This can happen if the application has not been installed by the administrator of the tenant or consented to by any user in the tenant. You may have sent your authentication request to the wrong tenant."
        )
    }

    static func missingParameter(_ name: String) -> STSError {
        STSError(status: 400, error: "invalid_request", code: 900144, message: "The request body must contain the following parameter: '\(name)'.")
    }

    static func unsupportedGrantType(_ grantType: String) -> STSError {
        STSError(status: 400, error: "unsupported_grant_type", code: 70003, message: "The app requested an unsupported grant type '\(grantType)'.")
    }

    static func tenantNotFound(_ tenant: String) -> STSError {
        STSError(
            status: 400, error: "invalid_tenant", code: 90002,
            message:
                "Tenant '\(tenant)' not found. Check to make sure you have the correct tenant ID and are signing into the correct cloud. Check with your subscription administrator, this may happen if there are no active subscriptions for the tenant."
        )
    }

    static func severalResources(_ scope: String) -> STSError {
        STSError(
            status: 400, error: "invalid_scope", code: 28000,
            message: "Provided value for the input parameter scope is not valid because it contains more than one resource. Scope \(scope) is not valid.")
    }

    static func invalidScope(_ scope: String) -> STSError {
        STSError(
            status: 400, error: "invalid_scope", code: 70011,
            message:
                "The provided request must include a 'scope' input parameter. The provided value for the input parameter 'scope' is not valid. The scope \(scope) is not valid."
        )
    }

    static func clientCredentialsScope(_ scope: String) -> STSError {
        STSError(
            status: 400, error: "invalid_scope", code: 1002012,
            message:
                "The provided value for scope \(scope) is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI)."
        )
    }

    static func noTenant() -> STSError {
        STSError(
            status: 400, error: "invalid_request", code: 50059,
            message: "No tenant-identifying information found in either the request or implied by any provided credentials.")
    }

    /// A refresh token the emulator never issued. The platform answers AADSTS9002313 for a
    /// token it cannot parse.
    static func malformedGrant() -> STSError {
        STSError(status: 400, error: "invalid_grant", code: 9002313, message: "Invalid request. Request is malformed or invalid.")
    }

    /// A refresh token redeemed at a tenant that did not issue it (and is not one the user is a
    /// guest of). The platform answers AADSTS7000012 (cases/33: the quoted body has no
    /// `error_uri` and no line breaks); the token itself stays good at its own tenant.
    static func grantForAnotherTenant() -> STSError {
        STSError(
            status: 400, error: "invalid_grant", code: 7000012, message: "The grant was obtained for a different tenant.",
            includesErrorURI: false)
    }

    /// A refresh token superseded by rotation and presented after the grace. Entra itself does
    /// not revoke superseded tokens; the emulator answers AADSTS70000, the platform's code for
    /// "provided grant is invalid or malformed", with no suberror.
    static func supersededGrant() -> STSError {
        STSError(status: 400, error: "invalid_grant", code: 70000, message: "Provided grant is invalid or malformed.")
    }

    /// Case 05: refresh tokens revoked (password change, revokeSignInSessions).
    static func revokedGrant(issuedAt: String, validFrom: String) -> STSError {
        STSError(
            status: 400, error: "invalid_grant", code: 50173,
            message:
                "The provided grant has expired due to it being revoked, a fresh auth token is needed. The user might have changed or reset their password. The grant was issued on '\(issuedAt)' and the TokensValidFrom date (before which tokens are not valid) for this user is '\(validFrom)'.",
            separator: "\r\n")
    }

    /// Case 06.
    static func consentRequired(clientID: String) -> STSError {
        STSError(
            status: 400, error: "invalid_grant", code: 65001,
            message:
                "The user or administrator has not consented to use the application with ID '\(clientID)' named 'TokenRelay Emulator App'. Send an interactive authorization request for this user and resource.",
            suberror: "consent_required", includesErrorURI: false, separator: "\r\n")
    }

    static func codeRedeemed() -> STSError {
        STSError(
            status: 400, error: "invalid_grant", code: 54005,
            message: "OAuth2 Authorization code was already redeemed, please retry with a new valid code or use an existing refresh token.")
    }

    static func codeExpired() -> STSError {
        STSError(
            status: 400, error: "invalid_grant", code: 70008,
            message:
                "The provided authorization code or refresh token has expired due to inactivity. Send a new interactive authorization request for this user and resource."
        )
    }

    static func codeVerifierMismatch() -> STSError {
        STSError(
            status: 400, error: "invalid_grant", code: 501481,
            message: "The Code_Verifier does not match the code_challenge supplied in the authorization request.")
    }

    static func redirectURIMismatch(_ uri: String, clientID: String) -> STSError {
        STSError(
            status: 400, error: "invalid_grant", code: 50011,
            message: "The redirect URI '\(uri)' specified in the request does not match the redirect URIs configured for the application '\(clientID)'.")
    }

    static func assertionInvalid(_ reason: String) -> STSError {
        STSError(status: 400, error: "invalid_grant", code: 50013, message: "Assertion failed signature validation. [Reason - \(reason)]")
    }

    static func assertionExpired() -> STSError {
        STSError(status: 400, error: "invalid_grant", code: 500133, message: "Assertion is not within its valid time range.")
    }

    /// Case 11.
    static func temporarilyUnavailable() -> STSError {
        STSError(
            status: 503, error: "temporarily_unavailable", code: 90033, message: "A transient error has occurred. Please try again.",
            includesErrorURI: false, separator: "\r\n")
    }

    static func serverError() -> STSError {
        STSError(status: 500, error: "server_error", code: 50000, message: "There was an error issuing a token or an issue with our sign-in service.")
    }

    /// The platform's text for `code` when the emulator knows it, for faults that name only a code.
    static func known(code: Int) -> STSError? {
        switch code {
        case 700082:
            STSError(
                status: 400, error: "invalid_grant", code: 700082,
                message:
                    "The refresh token has expired due to inactivity. The token was issued on 2026-05-20T16:18:37.2732417Z and was inactive for 90.00:00:00.",
                suberror: "bad_token")
        case 50076:
            STSError(
                status: 400, error: "invalid_grant", code: 50076,
                message:
                    "Due to a configuration change made by your administrator, or because you moved to a new location, you must use multi-factor authentication to access '00000003-0000-0000-c000-000000000000'.",
                suberror: "basic_action")
        case 50173: revokedGrant(issuedAt: "2020-08-26T13:52:10.1898142Z", validFrom: "2021-01-26T21:20:37.0000000Z")
        case 65001: consentRequired(clientID: "00000000-0000-0000-0000-000000000000")
        case 7000215: invalidClientSecret(clientID: "00000000-0000-0000-0000-000000000000")
        case 7000222:
            STSError(
                status: 401, error: "invalid_client", code: 7000222,
                message:
                    "The provided client secret keys for app '00000000-0000-0000-0000-000000000000' are expired. Visit the Azure portal to create new keys for your app."
            )
        case 90033: temporarilyUnavailable()
        case 70008: codeExpired()
        case 70000: supersededGrant()
        case 9002313: malformedGrant()
        case 7000012: grantForAnotherTenant()
        case 50000: serverError()
        default: nil
        }
    }

    // MARK: Wire form

    /// The HTTP response.
    /// - Parameters:
    ///   - b2c: write the B2C shape (`AADB2C` prefix, only `error` and `error_description`).
    ///   - now: the time written in `timestamp`.
    ///   - traceID: `trace_id` and `x-ms-request-id`.
    ///   - correlationID: `correlation_id` (the request's `client-request-id` when it sent one).
    func response(b2c: Bool, now: Date, traceID: String, correlationID: String) -> HTTPResponse {
        let timestamp = Timestamps.sts(now)
        var headers = HTTPHeaders([
            ("Content-Type", "application/json; charset=utf-8"), ("Cache-Control", "no-store, no-cache"), ("Pragma", "no-cache"),
        ])
        let body: JSONValue
        if b2c {
            let description = "AADB2C\(code): \(message)\r\nCorrelation ID: \(correlationID)\r\nTimestamp: \(timestamp)"
            body = ["error": .string(error), "error_description": .string(description)]
        } else {
            headers.add("x-ms-request-id", traceID)
            let description =
                "AADSTS\(code): \(message)\(separator)Trace ID: \(traceID)\(separator)Correlation ID: \(correlationID)\(separator)Timestamp: \(timestamp)"
            var members: [(String, JSONValue)] = [
                ("error", .string(error)), ("error_description", .string(description)), ("error_codes", [.int(code)]),
                ("timestamp", .string(timestamp)), ("trace_id", .string(traceID)), ("correlation_id", .string(correlationID)),
            ]
            if includesErrorURI { members.append(("error_uri", .string("https://login.microsoftonline.com/error?code=\(code)"))) }
            if let suberror { members.append(("suberror", .string(suberror))) }
            if let claims {
                switch claimsEncoding {
                case "base64": members.append(("claims", .string(Data(claims.utf8).base64EncodedString())))
                case "object": members.append(("claims", JSONValue.parse(Array(claims.utf8)) ?? .string(claims)))
                default: members.append(("claims", .string(claims)))
                }
            }
            body = .object(members)
        }
        for (name, value) in self.headers { headers.set(name, value) }
        return HTTPResponse(status: status, headers: headers, body: body.bytes)
    }

    /// `error`, `error_description` (and `error_uri`) as an authorize redirect carries them.
    func redirectParameters(now: Date, traceID: String, correlationID: String) -> [(String, String)] {
        let description =
            "AADSTS\(code): \(message)\r\nTrace ID: \(traceID)\r\nCorrelation ID: \(correlationID)\r\nTimestamp: \(Timestamps.sts(now))"
        return [("error", error), ("error_description", description), ("error_uri", "https://login.microsoftonline.com/error?code=\(code)")]
    }
}

/// Time formats of the wire.
enum Timestamps {
    private static func components(_ date: Date) -> DateComponents {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar.dateComponents([.year, .month, .day, .hour, .minute, .second, .nanosecond], from: date)
    }

    private static func two(_ value: Int?) -> String {
        let v = value ?? 0
        return v < 10 ? "0\(v)" : "\(v)"
    }

    /// `2026-08-26 10:12:51Z`, as in STS error bodies.
    static func sts(_ date: Date) -> String {
        let c = components(date)
        return "\(c.year ?? 0)-\(two(c.month))-\(two(c.day)) \(two(c.hour)):\(two(c.minute)):\(two(c.second))Z"
    }

    /// `2022-07-14T21:33:37`, as in Graph's `innerError.date`.
    static func graph(_ date: Date) -> String {
        let c = components(date)
        return "\(c.year ?? 0)-\(two(c.month))-\(two(c.day))T\(two(c.hour)):\(two(c.minute)):\(two(c.second))"
    }

    /// `2020-08-26T13:52:10.1898142Z`, as in AADSTS50173's description.
    static func dotNet(_ date: Date) -> String {
        let c = components(date)
        let ticks = (c.nanosecond ?? 0) / 100
        let fraction = String(repeating: "0", count: 7 - String(ticks).count) + String(ticks)
        return "\(c.year ?? 0)-\(two(c.month))-\(two(c.day))T\(two(c.hour)):\(two(c.minute)):\(two(c.second)).\(fraction)Z"
    }
}
