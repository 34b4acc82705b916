// Generated once from /work/shared/cases/*.json (real STS/Graph response shapes); the tests
// never read /work/shared at run time. Each fixture keeps the case id, status, headers and body.

/// One recorded response from /work/shared/cases.
struct CaseResponse: Sendable {
    let id: String
    let status: Int
    let headers: [(String, String)]
    let body: String
    var bodyBytes: [UInt8] { Array(body.utf8) }
    /// The first header with this name, compared case-insensitively.
    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
}

enum Cases {
    /// 01-aadsts700082-refresh-token-inactive-bad-token
    static let c01 = CaseResponse(
        id: "01-aadsts700082-refresh-token-inactive-bad-token",
        status: 400,
        headers: [
            ("Content-Type", "application/json; charset=utf-8"), ("Cache-Control", "no-store, no-cache"), ("Pragma", "no-cache"),
            ("x-ms-request-id", "1a1a1a1a-0000-4000-8000-000000000001"),
        ],
        body: #"""
            {
              "error": "invalid_grant",
              "error_description": "AADSTS700082: The refresh token has expired due to inactivity. The token was issued on 2026-05-20T16:18:37.2732417Z and was inactive for 90.00:00:00. Trace ID: 1a1a1a1a-0000-4000-8000-000000000001 Correlation ID: 2b2b2b2b-0000-4000-8000-000000000001 Timestamp: 2026-08-26 10:12:51Z",
              "error_codes": [
                700082
              ],
              "timestamp": "2026-08-26 10:12:51Z",
              "trace_id": "1a1a1a1a-0000-4000-8000-000000000001",
              "correlation_id": "2b2b2b2b-0000-4000-8000-000000000001",
              "error_uri": "https://login.microsoftonline.com/error?code=700082",
              "suberror": "bad_token"
            }
            """#)

    /// 02-aadsts50076-mfa-required-basic-action-keep-rt
    static let c02 = CaseResponse(
        id: "02-aadsts50076-mfa-required-basic-action-keep-rt",
        status: 400,
        headers: [
            ("Content-Type", "application/json; charset=utf-8"), ("Cache-Control", "no-store, no-cache"), ("Pragma", "no-cache"),
            ("x-ms-request-id", "1a1a1a1a-0000-4000-8000-000000000002"),
        ],
        body: #"""
            {
              "error": "invalid_grant",
              "error_description": "AADSTS50076: Due to a configuration change made by your administrator, or because you moved to a new location, you must use multi-factor authentication to access '00000003-0000-0000-c000-000000000000'. Trace ID: 1a1a1a1a-0000-4000-8000-000000000002 Correlation ID: 2b2b2b2b-0000-4000-8000-000000000002 Timestamp: 2025-02-12 15:57:00Z",
              "error_codes": [
                50076
              ],
              "timestamp": "2025-02-12 15:57:00Z",
              "trace_id": "1a1a1a1a-0000-4000-8000-000000000002",
              "correlation_id": "2b2b2b2b-0000-4000-8000-000000000002",
              "error_uri": "https://login.microsoftonline.com/error?code=50076",
              "suberror": "basic_action"
            }
            """#)

    /// 05-aadsts50173-grant-revoked-password-change
    static let c05 = CaseResponse(
        id: "05-aadsts50173-grant-revoked-password-change",
        status: 400,
        headers: [
            ("Content-Type", "application/json; charset=utf-8"), ("Cache-Control", "no-store, no-cache"), ("Pragma", "no-cache"),
            ("x-ms-request-id", "1a1a1a1a-0000-4000-8000-000000000005"),
        ],
        body: #"""
            {
              "error": "invalid_grant",
              "error_description": "AADSTS50173: The provided grant has expired due to it being revoked, a fresh auth token is needed. The user might have changed or reset their password. The grant was issued on '2020-08-26T13:52:10.1898142Z' and the TokensValidFrom date (before which tokens are not valid) for this user is '2021-01-26T21:20:37.0000000Z'.\r\nTrace ID: 1a1a1a1a-0000-4000-8000-000000000005\r\nCorrelation ID: 2b2b2b2b-0000-4000-8000-000000000005\r\nTimestamp: 2021-01-26 23:28:38Z",
              "error_codes": [
                50173
              ],
              "timestamp": "2021-01-26 23:28:38Z",
              "trace_id": "1a1a1a1a-0000-4000-8000-000000000005",
              "correlation_id": "2b2b2b2b-0000-4000-8000-000000000005",
              "error_uri": "https://login.microsoftonline.com/error?code=50173"
            }
            """#)

    /// 06-aadsts65001-consent-required
    static let c06 = CaseResponse(
        id: "06-aadsts65001-consent-required",
        status: 400,
        headers: [
            ("Content-Type", "application/json; charset=utf-8"), ("Cache-Control", "no-store, no-cache"), ("Pragma", "no-cache"),
            ("x-ms-request-id", "1a1a1a1a-0000-4000-8000-000000000006"),
        ],
        body: #"""
            {
              "error": "invalid_grant",
              "error_description": "AADSTS65001: The user or administrator has not consented to use the application with ID '11111111-2222-3333-4444-555555555555' named '<app-name>'. Send an interactive authorization request for this user and resource.\r\nTrace ID: 1a1a1a1a-0000-4000-8000-000000000006\r\nCorrelation ID: 2b2b2b2b-0000-4000-8000-000000000006\r\nTimestamp: 2019-10-02 10:26:15Z",
              "error_codes": [
                65001
              ],
              "timestamp": "2019-10-02 10:26:15Z",
              "trace_id": "1a1a1a1a-0000-4000-8000-000000000006",
              "correlation_id": "2b2b2b2b-0000-4000-8000-000000000006",
              "suberror": "consent_required"
            }
            """#)

    /// 08-aadb2c90080-b2c-expired-grant
    static let c08 = CaseResponse(
        id: "08-aadb2c90080-b2c-expired-grant",
        status: 400,
        headers: [("Content-Type", "application/json; charset=utf-8"), ("Cache-Control", "no-store, no-cache"), ("Pragma", "no-cache")],
        body: #"""
            {
              "error": "invalid_grant",
              "error_description": "AADB2C90080: The provided grant has expired. Please re-authenticate and try again. Current time: 1587023649, Grant issued time: 1586869378, Grant expiration time: 1586955778\r\nCorrelation ID: 2b2b2b2b-0000-4000-8000-000000000008\r\nTimestamp: 2020-04-16 07:54:09Z"
            }
            """#)

    /// 09-aadsts7000215-invalid-client-secret-401
    static let c09 = CaseResponse(
        id: "09-aadsts7000215-invalid-client-secret-401",
        status: 401,
        headers: [
            ("Content-Type", "application/json; charset=utf-8"), ("Cache-Control", "no-store, no-cache"), ("Pragma", "no-cache"),
            ("x-ms-request-id", "1a1a1a1a-0000-4000-8000-000000000009"),
        ],
        body: #"""
            {
              "error": "invalid_client",
              "error_description": "AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app '11111111-2222-3333-4444-555555555555'.\r\nTrace ID: 1a1a1a1a-0000-4000-8000-000000000009\r\nCorrelation ID: 2b2b2b2b-0000-4000-8000-000000000009\r\nTimestamp: 2023-05-06 06:03:00Z",
              "error_codes": [
                7000215
              ],
              "timestamp": "2023-05-06 06:03:00Z",
              "trace_id": "1a1a1a1a-0000-4000-8000-000000000009",
              "correlation_id": "2b2b2b2b-0000-4000-8000-000000000009",
              "error_uri": "https://login.microsoftonline.com/error?code=7000215"
            }
            """#)

    /// 10-sts-429-plain-text-body-retry-after
    static let c10 = CaseResponse(
        id: "10-sts-429-plain-text-body-retry-after",
        status: 429,
        headers: [("Retry-After", "60")],
        body: #"""
            Too Many Requests
            """#)

    /// 11-sts-503-temporarily-unavailable-90033
    static let c11 = CaseResponse(
        id: "11-sts-503-temporarily-unavailable-90033",
        status: 503,
        headers: [
            ("Content-Type", "application/json; charset=utf-8"), ("Cache-Control", "no-store, no-cache"), ("Pragma", "no-cache"),
            ("x-ms-request-id", "1a1a1a1a-0000-4000-8000-000000000011"),
        ],
        body: #"""
            {
              "error": "temporarily_unavailable",
              "error_description": "AADSTS90033: A transient error has occurred. Please try again.\r\nTrace ID: 1a1a1a1a-0000-4000-8000-000000000011\r\nCorrelation ID: 2b2b2b2b-0000-4000-8000-000000000011\r\nTimestamp: 2020-09-28 21:43:07Z",
              "error_codes": [
                90033
              ],
              "timestamp": "2020-09-28 21:43:07Z",
              "trace_id": "1a1a1a1a-0000-4000-8000-000000000011",
              "correlation_id": "2b2b2b2b-0000-4000-8000-000000000011"
            }
            """#)

    /// 13-refresh-token-rotation-success
    static let c13 = CaseResponse(
        id: "13-refresh-token-rotation-success",
        status: 200,
        headers: [
            ("Content-Type", "application/json; charset=utf-8"), ("Cache-Control", "no-store, no-cache"), ("Pragma", "no-cache"),
            ("x-ms-request-id", "1a1a1a1a-0000-4000-8000-000000000013"),
        ],
        body: #"""
            {
              "token_type": "Bearer",
              "scope": "Mail.Read User.Read openid profile email",
              "expires_in": 4213,
              "ext_expires_in": 4213,
              "refresh_in": 2106,
              "access_token": "eyJ0eXAiOiJKV1QiLCJub25jZSI6Ijxub25jZT4iLCJhbGciOiJSUzI1NiIsImtpZCI6IjxraWQ-In0.<access-token-payload>.<signature>",
              "refresh_token": "1.AXkA<opaque-refresh-token-B>",
              "id_token": "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiIsImtpZCI6IjxraWQ-In0.<id-token-payload>.<signature>",
              "client_info": "eyJ1aWQiOiI2NjY2NjY2Ni03Nzc3LTg4ODgtOTk5OS0wMDAwMDAwMDAwMDAiLCJ1dGlkIjoiYWFhYWFhYWEtYmJiYi1jY2NjLWRkZGQtZWVlZWVlZWVlZWVlIn0",
              "foci": "1"
            }
            """#)

    /// 14-token-response-without-refresh-token
    static let c14 = CaseResponse(
        id: "14-token-response-without-refresh-token",
        status: 200,
        headers: [("Content-Type", "application/json; charset=utf-8"), ("Cache-Control", "no-store, no-cache"), ("Pragma", "no-cache")],
        body: #"""
            {
              "token_type": "Bearer",
              "scope": "Mail.ReadWrite Mail.Send.All User.Read profile openid email",
              "expires_in": 3599,
              "ext_expires_in": 3599,
              "access_token": "eyJ0eXAiOiJKV1QiLCJub25jZSI6Ijxub25jZT4iLCJhbGciOiJSUzI1NiIsImtpZCI6IjxraWQ-In0.<access-token-payload>.<signature>"
            }
            """#)

    /// 16-declined-scopes-narrower-grant
    static let c16 = CaseResponse(
        id: "16-declined-scopes-narrower-grant",
        status: 200,
        headers: [("Content-Type", "application/json; charset=utf-8"), ("Cache-Control", "no-store, no-cache"), ("Pragma", "no-cache")],
        body: #"""
            {
              "token_type": "Bearer",
              "scope": "Files.ReadWrite openid profile",
              "expires_in": 3600,
              "ext_expires_in": 3600,
              "access_token": "eyJ0eXAiOiJKV1QiLCJub25jZSI6Ijxub25jZT4iLCJhbGciOiJSUzI1NiIsImtpZCI6IjxraWQ-In0.<access-token-payload>.<signature>",
              "refresh_token": "1.AXkA<opaque-refresh-token-B>"
            }
            """#)

    /// 18-graph-401-cae-claims-challenge-unquoted-params
    static let c18 = CaseResponse(
        id: "18-graph-401-cae-claims-challenge-unquoted-params",
        status: 401,
        headers: [
            ("Content-Type", "application/json"), ("request-id", "3c3c3c3c-0000-4000-8000-000000000018"),
            ("client-request-id", "3c3c3c3c-0000-4000-8000-000000000018"),
            (
                "WWW-Authenticate",
                "Bearer realm=\"\", authorization_uri=https://login.microsoftonline.com/common/oauth2/authorize, client_id=\"00000003-0000-0000-c000-000000000000\", error=\"insufficient_claims\", claims=\"eyJhY2Nlc3NfdG9rZW4iOnsibmJmIjp7ImVzc2VudGlhbCI6dHJ1ZSwgInZhbHVlIjoiMTY1NzgzNDQxNyJ9fX0=\", errorDescription=\"Continuous access evaluation resulted in claims challenge with result: InteractionRequired and code: TokenIssuedBeforeRevocationTimestamp\""
            ),
        ],
        body: #"""
            {
              "error": {
                "code": "InvalidAuthenticationToken",
                "message": "Continuous access evaluation resulted in challenge with result: InteractionRequired and code: TokenIssuedBeforeRevocationTimestamp",
                "innerError": {
                  "date": "2022-07-14T21:33:37",
                  "request-id": "3c3c3c3c-0000-4000-8000-000000000018",
                  "client-request-id": "3c3c3c3c-0000-4000-8000-000000000018"
                }
              }
            }
            """#)

    /// 19-graph-401-cae-outdated-policies-stuck-cached-token
    static let c19 = CaseResponse(
        id: "19-graph-401-cae-outdated-policies-stuck-cached-token",
        status: 401,
        headers: [
            ("Content-Type", "application/json"),
            ("request-id", "3c3c3c3c-0000-4000-8000-000000000019"),
            ("client-request-id", "3c3c3c3c-0000-4000-8000-000000000019"),
            (
                "WWW-Authenticate",
                "Bearer realm=\"\", authorization_uri=\"https://login.microsoftonline.com/common/oauth2/authorize\", error=\"insufficient_claims\", claims=\"eyJhY2Nlc3NfdG9rZW4iOnsibmJmIjp7ImVzc2VudGlhbCI6dHJ1ZSwidmFsdWUiOiIxNzI2MDc3NTk1In0sInhtc19jYWVlcnJvciI6eyJ2YWx1ZSI6IjEwMDEyIn19fQ==\""
            ),
        ],
        body: #"""
            {
              "error": {
                "code": "InvalidAuthenticationToken",
                "message": "Continuous access evaluation resulted in challenge with result: InteractionRequired and code: TokenCreatedWithOutdatedPolicies",
                "innerError": {
                  "date": "2024-09-11T18:00:02",
                  "request-id": "3c3c3c3c-0000-4000-8000-000000000019",
                  "client-request-id": "3c3c3c3c-0000-4000-8000-000000000019"
                }
              }
            }
            """#)

    /// 21-graph-429-no-retry-after-exponential-backoff
    static let c21 = CaseResponse(
        id: "21-graph-429-no-retry-after-exponential-backoff",
        status: 429,
        headers: [
            ("Content-Type", "application/json"), ("request-id", "3c3c3c3c-0000-4000-8000-000000000021"),
            ("client-request-id", "3c3c3c3c-0000-4000-8000-000000000021"),
        ],
        body: #"""
            {
              "error": {
                "code": "TooManyRequests",
                "message": "The server is busy. Please try again later.",
                "innerError": {
                  "request-id": "3c3c3c3c-0000-4000-8000-000000000021",
                  "date": "2017-11-03T22:34:11"
                }
              }
            }
            """#)

    /// 29-obo-invalid-grant-two-error-codes
    static let c29 = CaseResponse(
        id: "29-obo-invalid-grant-two-error-codes",
        status: 400,
        headers: [
            ("Content-Type", "application/json; charset=utf-8"), ("Cache-Control", "no-store, no-cache"), ("Pragma", "no-cache"),
            ("x-ms-request-id", "1a1a1a1a-0000-4000-8000-000000000029"),
        ],
        body: #"""
            {
              "error": "invalid_grant",
              "error_description": "AADSTS70002: Error validating credentials. AADSTS500133: Assertion is not within its valid time range\r\nTrace ID: 1a1a1a1a-0000-4000-8000-000000000029\r\nCorrelation ID: 2b2b2b2b-0000-4000-8000-000000000029\r\nTimestamp: 2018-10-05 07:30:02Z",
              "error_codes": [
                70002,
                500133
              ],
              "timestamp": "2018-10-05 07:30:02Z",
              "trace_id": "1a1a1a1a-0000-4000-8000-000000000029",
              "correlation_id": "2b2b2b2b-0000-4000-8000-000000000029"
            }
            """#)

    /// 30-imported-refresh-token-truncated-9002313
    static let c30 = CaseResponse(
        id: "30-imported-refresh-token-truncated-9002313",
        status: 400,
        headers: [
            ("Content-Type", "application/json; charset=utf-8"), ("Cache-Control", "no-store, no-cache"), ("Pragma", "no-cache"),
            ("x-ms-request-id", "1a1a1a1a-0000-4000-8000-000000000030"),
        ],
        body: #"""
            {
              "error": "invalid_grant",
              "error_description": "AADSTS9002313: Invalid request. Request is malformed or invalid.\r\nTrace ID: 1a1a1a1a-0000-4000-8000-000000000030\r\nCorrelation ID: 2b2b2b2b-0000-4000-8000-000000000030\r\nTimestamp: 2020-10-05 13:08:18Z",
              "error_codes": [
                9002313
              ],
              "timestamp": "2020-10-05 13:08:18Z",
              "trace_id": "1a1a1a1a-0000-4000-8000-000000000030",
              "correlation_id": "2b2b2b2b-0000-4000-8000-000000000030",
              "error_uri": "https://login.microsoftonline.com/error?code=9002313"
            }
            """#)

    /// 33-aadsts7000012-refresh-token-for-a-different-tenant
    static let c33 = CaseResponse(
        id: "33-aadsts7000012-refresh-token-for-a-different-tenant",
        status: 400,
        headers: [
            ("Content-Type", "application/json; charset=utf-8"), ("Cache-Control", "no-store, no-cache"), ("Pragma", "no-cache"),
            ("x-ms-request-id", "1a1a1a1a-0000-4000-8000-000000000033"),
        ],
        body: #"""
            {
              "error": "invalid_grant",
              "error_description": "AADSTS7000012: The grant was obtained for a different tenant. Trace ID: 1a1a1a1a-0000-4000-8000-000000000033 Correlation ID: 2b2b2b2b-0000-4000-8000-000000000033 Timestamp: 2026-04-19 07:32:47Z",
              "error_codes": [
                7000012
              ],
              "timestamp": "2026-04-19 07:32:47Z",
              "trace_id": "1a1a1a1a-0000-4000-8000-000000000033",
              "correlation_id": "2b2b2b2b-0000-4000-8000-000000000033"
            }
            """#)
}
