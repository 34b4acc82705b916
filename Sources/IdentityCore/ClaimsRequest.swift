import Foundation

/// The `claims` request parameter (OpenID Connect Core §5.5) with client capabilities
/// (behaviour §1: `{"access_token":{"xms_cc":{"values":["cp1"]}}}` merged into every token
/// request when `client_capabilities` is configured; Microsoft identity platform "Client
/// capabilities" / CAE docs).
public enum ClaimsRequest {
    /// Merges client capabilities into a claims request.
    /// - Parameters:
    ///   - claims: JSON text or base64(url) of a JSON object; nil for none.
    ///   - capabilities: e.g. `["cp1"]`; merged as `access_token.xms_cc.values` (union with
    ///     values already there).
    /// - Returns: compact JSON text with sorted keys; nil when there is neither claims nor a
    ///   capability.
    /// - Throws: `ClaimsError` when `claims` is not a JSON object (plain or base64).
    public static func merged(claims: String?, capabilities: [String]) throws(ClaimsError) -> String? {
        var root: [String: JSONValue] = [:]
        if let claims, !claims.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
            root = try object(claims)
        }
        if !capabilities.isEmpty {
            var accessToken = root["access_token"]?.objectValue ?? [:]
            var xmsCC = accessToken["xms_cc"]?.objectValue ?? [:]
            var values = xmsCC["values"]?.arrayValue ?? []
            for capability in capabilities where !values.contains(.string(capability)) {
                values.append(.string(capability))
            }
            xmsCC["values"] = .array(values)
            accessToken["xms_cc"] = .object(xmsCC)
            root["access_token"] = .object(accessToken)
        }
        return root.isEmpty ? nil : JSONValue.object(root).compactSortedText
    }

    /// One claims request that asks for both: `challenge` (what an STS or a resource demanded)
    /// merged into `requested` (what the caller asked for), member by member; where both name the
    /// same claim, the challenge's value wins. An interactive sign-in must carry the challenge as
    /// its `claims` parameter to satisfy it (identity platform "Claims challenges, claims
    /// requests, and client capabilities"; OpenID Connect Core §5.5).
    /// - Parameters:
    ///   - requested: JSON text or base64(url) of a JSON object; nil for none.
    ///   - challenge: the same; nil for none.
    /// - Returns: compact JSON text with sorted keys (a value that is not a JSON object is left
    ///   out: the other is returned alone); nil when neither holds a claim.
    public static func combined(_ requested: String?, challenge: String?) -> String? {
        func parsed(_ text: String?) -> [String: JSONValue]? {
            guard let text, !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { return nil }
            return try? object(text)
        }
        func merge(_ base: [String: JSONValue], _ top: [String: JSONValue]) -> [String: JSONValue] {
            var result = base
            for (key, value) in top {
                if let inner = value.objectValue, let existing = result[key]?.objectValue {
                    result[key] = .object(merge(existing, inner))
                } else {
                    result[key] = value
                }
            }
            return result
        }
        let root = merge(parsed(requested) ?? [:], parsed(challenge) ?? [:])
        return root.isEmpty ? nil : JSONValue.object(root).compactSortedText
    }

    /// Whether a request with these claims must skip the access-token cache: any claim other
    /// than `access_token.xms_cc` does (capability-only claims do not, behaviour §1). Unparseable
    /// claims bypass the cache (they go to the STS, which judges them).
    public static func bypassesCache(claims: String?) -> Bool {
        guard let claims, !claims.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { return false }
        guard let root = try? object(claims) else { return true }
        for (key, value) in root {
            guard key == "access_token", let members = value.objectValue else { return true }
            if members.keys.contains(where: { $0 != "xms_cc" }) { return true }
        }
        return false
    }

    /// Canonical text of a claims request, for cache keys and memories.
    /// - Parameter claims: JSON text or base64(url) of a JSON object.
    /// - Returns: compact JSON with sorted keys.
    /// - Throws: `ClaimsError` when it is not a JSON object.
    public static func normalize(_ claims: String) throws(ClaimsError) -> String {
        JSONValue.object(try object(claims)).compactSortedText
    }

    /// JSON text as given (starts with `{`), else the UTF-8 of its base64(url) decoding.
    static func decodedText(_ value: String) -> String? {
        let trimmed = value.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("{") { return trimmed }
        guard let bytes = Base64URL.decode(trimmed) else { return nil }
        return String(validating: bytes, as: UTF8.self)
    }

    static func object(_ claims: String) throws(ClaimsError) -> [String: JSONValue] {
        guard let text = decodedText(claims), let object = JSONValue.parse(text)?.objectValue else {
            throw ClaimsError(detail: "claims must be a JSON object, as text or base64")
        }
        return object
    }
}

/// A claims value that is not a JSON object. Maps to 400 `invalid_request` (field `claims`).
public struct ClaimsError: Error, Sendable, Equatable, CustomStringConvertible {
    public let detail: String
    public var description: String { "invalid claims: \(detail)" }
}
