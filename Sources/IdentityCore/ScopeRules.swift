import Foundation

/// Request and response rules for scopes (behaviour §1 "Scopes", §4 `server_declined_scopes`).
///
/// Sources: Microsoft identity platform "Scopes and permissions" (`/.default`, one resource
/// per token request: AADSTS28000 / AADSTS70011); MSAL's declined-scope handling (MSAL
/// Python #450, MSAL.NET #743, MSAL iOS #393: OIDC scopes are never declined).
public enum ScopeRules {
    /// The OIDC scopes TokenRelay adds itself; never part of a cache key or a decline.
    public static let reserved: Set<String> = ["openid", "profile", "offline_access", "email"]
    /// The longest of ``reserved``, in UTF-8 bytes: longer text is none of them, lower-cased or
    /// not (no scalar lower-cases into more than one of their letters, and the one non-ASCII
    /// scalar that lower-cases into one, U+212A KELVIN SIGN, is three bytes), and is not
    /// lower-cased to be looked up.
    static let longestReserved = reserved.map(\.utf8.count).max() ?? 0

    /// Validates and normalises the scopes of a token request before any network call.
    ///
    /// Rules: exactly one of `scopes` / `resource`; empty or only-reserved scopes are invalid;
    /// scopes of several resources are invalid; `/.default` with other scopes of the same
    /// resource is invalid; `resource` becomes `{resource}/.default` (`//.default` when it
    /// ends with `/`), and one that already ends with `/.default` is invalid (a scope, not a
    /// resource); unprefixed scopes are Graph's.
    /// - Parameters:
    ///   - scopes: the request's `scopes` array.
    ///   - resource: the legacy `resource` parameter.
    /// - Returns: the normalised set.
    /// - Throws: `ScopeError` (→ 400 `invalid_scope`) naming the field.
    /// The most scopes one request may name; far above what any resource defines for one app.
    public static let maximumScopeCount = 50
    /// The longest scope or resource URI accepted, in bytes (UTF-8).
    public static let maximumScopeBytes = 256

    public static func requested(scopes: [String]?, resource: String?) throws(ScopeError) -> ScopeSet {
        // Bounded before anything else, so the STS request and the cache key stay small.
        let field = scopes == nil ? "resource" : "scopes"
        var count = 0
        for value in (scopes ?? []) + (resource.map { [$0] } ?? []) {
            guard value.utf8.count <= maximumScopeBytes else {
                throw ScopeError(field: field, detail: "a scope may be at most \(maximumScopeBytes) bytes long")
            }
            // Counted and checked as ScopeSet splits them: an element may hold several.
            for token in ScopeSet.tokens(of: value) {
                count += 1
                guard token.utf8.allSatisfy(isScopeTokenByte) else {
                    throw ScopeError(
                        field: field, detail: "a scope may hold only printable ASCII other than '\"' and '\\' (RFC 6749 §3.3 scope-token)")
                }
            }
        }
        if count > maximumScopeCount {
            throw ScopeError(field: "scopes", detail: "at most \(maximumScopeCount) scopes may be requested at once")
        }
        switch (scopes, resource) {
        case (.some, .some):
            throw ScopeError(field: "resource", detail: "give either scopes or resource, not both")
        case (nil, nil):
            throw ScopeError(field: "scopes", detail: "scopes are required")
        case (nil, .some(let resource)):
            let trimmed = resource.trimmingCharacters(in: .whitespacesAndNewlines)
            guard ScopeSet.tokens(of: trimmed).count == 1 else {
                throw ScopeError(field: "resource", detail: "resource must be one non-empty resource URI")
            }
            // Already a scope: `{resource}/.default/.default` would be refused by the platform
            // (AADSTS70011) after a call, and the caller meant `scopes`.
            guard !trimmed.lowercased().hasSuffix("/.default") else {
                throw ScopeError(
                    field: "resource", detail: "resource is a resource URI such as https://graph.microsoft.com; '\(trimmed)' is a scope: send it in scopes")
            }
            if let malformation = Scope(trimmed + "/.default").malformation {
                throw ScopeError(field: "resource", detail: "resource '\(trimmed)' \(malformation); \(resourceForms)")
            }
            return ScopeSet(normalizing: [trimmed + "/.default"])
        case (.some(let scopes), nil):
            for element in scopes where element.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
                throw ScopeError(field: "scopes", detail: "scopes must not contain an empty string")
            }
            for (index, element) in scopes.enumerated() {
                for text in ScopeSet.tokens(of: element) {
                    if let malformation = Scope(text).malformation {
                        throw ScopeError(field: "scopes", detail: "scopes[\(index)] '\(text)' \(malformation); \(resourceForms)")
                    }
                }
            }
            let set = ScopeSet(normalizing: scopes)
            guard !set.isEmpty else {
                throw ScopeError(
                    field: "scopes",
                    detail: "scopes must name a resource scope; openid, profile, offline_access and email are added automatically")
            }
            let resources = Set(set.scopes.map(\.resourceKey))
            guard resources.count == 1 else {
                throw ScopeError(
                    field: "scopes", detail: "scopes name \(resources.count) resources; one token request may name one resource only")
            }
            if set.isDefaultScope, set.scopes.count > 1 {
                throw ScopeError(field: "scopes", detail: "/.default cannot be mixed with other scopes of the same resource")
            }
            return set
        }
    }

    /// The forms a scope's resource takes, for the problem that refuses another.
    static let resourceForms =
        "a scope is a permission of Microsoft Graph (User.Read) or a resource and a permission: "
        + "https://{host}/{permission}, api://{app id}/{permission}, {app id}/.default"

    /// A byte of RFC 6749 §3.3's `scope-token`: `%x21 / %x23-5B / %x5D-7E`. A line break inside
    /// a scope used to pass as whitespace the scope check did not split on ("\r\n" is one
    /// `Character`), so a scope-limited key could name a scope outside its patterns.
    static func isScopeTokenByte(_ byte: UInt8) -> Bool {
        byte.isASCIIVisible && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
    }

    /// The granted set from the STS's space-separated `scope` response field.
    ///
    /// Unprefixed scopes are taken to belong to the requested resource (Graph answers
    /// `User.Read` for `https://graph.microsoft.com/User.Read`). A missing or blank `scope`
    /// means the requested set (RFC 6749 §5.1). A `/.default` request is granted as its
    /// `/.default` scope plus whatever the STS lists, so a cached entry is found by the same
    /// request again.
    /// - Parameters:
    ///   - scopeString: the response's `scope`, OIDC scopes included.
    ///   - requested: the request's set.
    /// - Returns: the normalised granted set.
    public static func granted(_ scopeString: String?, requested: ScopeSet) -> ScopeSet {
        guard let scopeString, !isBlank(scopeString) else { return requested }
        // ASCII text split on its bytes (the same pieces: no ASCII character holds a space but the
        // space itself); a `Character` split was 14k instructions of a forced refresh (behaviour §10).
        var items =
            scopeString.utf8.allSatisfy { $0 < 0x80 }
            ? scopeString.utf8.split(separator: UInt8(ascii: " ")).map { String(Substring($0)) }
            : scopeString.split(separator: " ").map(String.init)
        let resource = requested.resource ?? Scope.graph
        // Unprefixed response scopes belong to the requested resource.
        items = items.map { item in
            if item.utf8.contains(UInt8(ascii: "/")) || reserved.contains(item.lowercased()) || resource == Scope.graph { return item }
            return resource.hasSuffix("/") ? resource + item : resource + "/" + item
        }
        items += requested.scopes.filter(\.isDefault).map(\.fullURI)
        return ScopeSet(normalizing: items)
    }

    /// Whether `text` is empty or white space alone (`CharacterSet.whitespacesAndNewlines`):
    /// Foundation's trimming only when no byte is visible ASCII, which a granted scope always has
    /// (every forced refresh reads one; the trimming showed in its profile, behaviour §10).
    private static func isBlank(_ text: String) -> Bool {
        if text.utf8.contains(where: { $0 > 0x20 && $0 < 0x7F }) { return false }
        return text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
    }

    /// Requested scopes the STS did not grant, in canonical form.
    ///
    /// Compared case-insensitively after normalising; OIDC scopes are never declined;
    /// `/.default` requests never report declines (the STS lists the static permissions).
    /// - Returns: the declined canonical scopes, sorted; empty when all were granted.
    public static func declined(requested: ScopeSet, granted: ScopeSet) -> [String] {
        if requested.isDefaultScope { return [] }
        let grantedKeys = Set(granted.canonical.map { $0.lowercased() })
        return requested.canonical.filter { !grantedKeys.contains($0.lowercased()) }
    }
}
