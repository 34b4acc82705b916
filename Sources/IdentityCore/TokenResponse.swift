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
        guard let members = try? JSONDecoder().decode(Members.self, from: Data(body)) else {
            throw TokenResponseError(detail: "token response is not a JSON object")
        }
        func text(_ value: JSONValue?) -> String? {
            switch value {
            case .string(let value)?: return value.isEmpty ? nil : value
            case .number?: return value?.intValue.map(String.init)
            default: return nil
            }
        }
        guard let accessToken = text(members.accessToken) else { throw TokenResponseError(detail: "access_token is missing") }
        guard let expiresIn = members.expiresIn?.intValue else {
            throw TokenResponseError(detail: "expires_in is missing or not a number")
        }
        return TokenResponse(
            accessToken: accessToken,
            tokenType: text(members.tokenType) ?? "Bearer",
            expiresIn: expiresIn,
            extExpiresIn: members.extExpiresIn?.intValue,
            refreshIn: members.refreshIn?.intValue,
            scope: text(members.scope),
            refreshToken: text(members.refreshToken),
            idToken: text(members.idToken),
            clientInfo: text(members.clientInfo),
            foci: text(members.foci))
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
    /// The members a token response is read for, each the `JSONValue` it is (the same
    /// `JSONDecoder` reading `JSONValue.parse` gives them; nil when absent or null, which the
    /// reading takes alike). Only these are converted: decoding the whole body into `JSONValue`
    /// was a tenth of a forced refresh's instructions (behaviour §10). The text is still read
    /// whole, and refused when it is not JSON or not an object.
    struct Members: Decodable {
        var accessToken, tokenType, expiresIn, extExpiresIn, refreshIn, scope, refreshToken, idToken, clientInfo, foci: JSONValue?

        enum Key: String, CodingKey {
            case access_token, token_type, expires_in, ext_expires_in, refresh_in, scope, refresh_token, id_token, client_info, foci
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: Key.self)
            accessToken = try Self.text(container, .access_token)
            tokenType = try Self.text(container, .token_type)
            expiresIn = try Self.number(container, .expires_in)
            extExpiresIn = try Self.number(container, .ext_expires_in)
            refreshIn = try Self.number(container, .refresh_in)
            scope = try Self.text(container, .scope)
            refreshToken = try Self.text(container, .refresh_token)
            idToken = try Self.text(container, .id_token)
            clientInfo = try Self.text(container, .client_info)
            foci = try Self.text(container, .foci)
        }

        /// A member that is text when the platform sends it as it should, asked for as `String`
        /// first: decoding into `JSONValue` goes through a nested decoder and tries each kind in
        /// turn (two thirds of reading a token response, behaviour §10). Any other kind is read as
        /// `JSONValue` (a failed `String` try costs an error), null or no member is nil. Two
        /// functions, not one generic over the kind: the generic cost 6k instructions a refresh.
        private static func text(_ container: KeyedDecodingContainer<Key>, _ key: Key) throws -> JSONValue? {
            if let value = try? container.decodeIfPresent(String.self, forKey: key) { return .string(value) }
            return try container.decodeIfPresent(JSONValue.self, forKey: key)
        }

        /// A member that is a number when sent as it should (`expires_in`), asked for as `Double`
        /// first, as `JSONValue` reads a number; a digit string and any other kind as `JSONValue`.
        private static func number(_ container: KeyedDecodingContainer<Key>, _ key: Key) throws -> JSONValue? {
            if let value = try? container.decodeIfPresent(Double.self, forKey: key) { return .number(value) }
            return try container.decodeIfPresent(JSONValue.self, forKey: key)
        }
    }
}

/// A 200 body that is not a usable token response. `detail` never contains token text.
public struct TokenResponseError: Error, Sendable, Equatable, CustomStringConvertible {
    public let detail: String
    public var description: String { "unusable token response: \(detail)" }
}
