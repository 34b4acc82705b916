import Foundation

/// A successful token-endpoint response (RFC 6749 §5.1 plus the identity platform's
/// `ext_expires_in`, `refresh_in`, `client_info`, `foci`).
///
/// Parsed leniently (behaviour §5): numbers may be digit strings; a missing or empty
/// `refresh_token` is nil, never "" (case 14: never store a null over a stored token);
/// `foci` is kept for information (case 13).
public struct TokenResponse: Sendable {
    public let accessToken: String
    /// `Bearer` when absent.
    public let tokenType: String
    /// Seconds from now until the access token expires: the lifetime to report.
    public let expiresIn: Int
    /// Seconds until the token's extended expiry (outage fallback only).
    public let extExpiresIn: Int?
    /// Seconds until a proactive refresh is due; never the lifetime (MSAL Python PR #320).
    public let refreshIn: Int?
    /// Granted scopes as sent (Graph unprefixed, OIDC included).
    public let scope: String?
    /// The rotated refresh token, nil when none was sent.
    public let refreshToken: String?
    public let idToken: String?
    /// base64url `client_info` (see `ClientInfo`).
    public let clientInfo: String?
    /// Family id of a family refresh token (`"1"`), stored as `family_id`.
    public let foci: String?

    /// Parses a 200 token response body.
    /// - Parameter body: the UTF-8 JSON body.
    /// - Returns: the response.
    /// - Throws: `TokenResponseError` when the body is not a JSON object or lacks
    ///   `access_token` / a usable `expires_in`.
    public static func parse(_ body: [UInt8]) throws(TokenResponseError) -> TokenResponse {
        guard let object = try? JSONDecoder().decode(Members.self, from: Data(body)).values else {
            throw TokenResponseError(detail: "token response is not a JSON object")
        }
        func text(_ key: String) -> String? {
            switch object[key] {
            case .string(let value)?: return value.isEmpty ? nil : value
            case .number?: return object[key]?.intValue.map(String.init)
            default: return nil
            }
        }
        guard let accessToken = text("access_token") else { throw TokenResponseError(detail: "access_token is missing") }
        guard let expiresIn = object["expires_in"]?.intValue else {
            throw TokenResponseError(detail: "expires_in is missing or not a number")
        }
        return TokenResponse(
            accessToken: accessToken,
            tokenType: text("token_type") ?? "Bearer",
            expiresIn: expiresIn,
            extExpiresIn: object["ext_expires_in"]?.intValue,
            refreshIn: object["refresh_in"]?.intValue,
            scope: text("scope"),
            refreshToken: text("refresh_token"),
            idToken: text("id_token"),
            clientInfo: text("client_info"),
            foci: text("foci"))
    }

    public init(
        accessToken: String, tokenType: String = "Bearer", expiresIn: Int, extExpiresIn: Int? = nil, refreshIn: Int? = nil,
        scope: String? = nil, refreshToken: String? = nil, idToken: String? = nil, clientInfo: String? = nil, foci: String? = nil
    ) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresIn = expiresIn
        self.extExpiresIn = extExpiresIn
        self.refreshIn = refreshIn
        self.scope = scope
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.clientInfo = clientInfo
        self.foci = foci
    }
}

extension TokenResponse {
    /// The members a token response is read for, each read as the `JSONValue` it is (the same
    /// `JSONDecoder` reading `JSONValue.parse` gives them). Only these are converted: decoding
    /// the whole body into `JSONValue` was a tenth of a forced refresh's instructions
    /// (callgrind, issue 30). The text is still read whole, and refused as before when it is not
    /// JSON or not an object.
    struct Members: Decodable {
        var values: [String: JSONValue] = [:]

        enum Key: String, CodingKey, CaseIterable {
            case access_token, token_type, expires_in, ext_expires_in, refresh_in, scope, refresh_token, id_token, client_info, foci
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: Key.self)
            for key in Key.allCases {
                if let value = try container.decodeIfPresent(JSONValue.self, forKey: key) { values[key.rawValue] = value }
            }
        }
    }
}

/// A 200 body that is not a usable token response. `detail` never contains token text.
public struct TokenResponseError: Error, Sendable, Equatable, CustomStringConvertible {
    public let detail: String
    public var description: String { "unusable token response: \(detail)" }
}
