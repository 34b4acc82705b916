import HTTPCommon

/// The `scope` parameter of an authorize or token request, split the way the platform reads it:
/// OIDC scopes apart, every other scope belonging to one resource.
///
/// Unprefixed scopes (`User.Read`) belong to Microsoft Graph; a resource ending in `/` gives
/// `//.default`. Source: identity platform docs, "Scopes and permissions" and "The .default scope".
struct RequestedScopes: Sendable, Equatable {
    static let graphResource = "https://graph.microsoft.com"
    static let graphAppID = "00000003-0000-0000-c000-000000000000"
    static let oidcScopes: Set<String> = ["openid", "profile", "email", "offline_access"]

    /// The resource every non-OIDC scope names (`https://graph.microsoft.com` for Graph); nil
    /// when only OIDC scopes were requested.
    var resource: String?
    /// Permission names on `resource` (`User.Read`, `.default`, `access_as_user`), in request order.
    var permissions: [String]
    /// The OIDC scopes requested, lower-cased.
    var oidc: Set<String>

    var isGraph: Bool { resource == Self.graphResource }
    var isDefault: Bool { permissions.contains { $0.caseInsensitiveEquals(".default") } }
    var wantsRefreshToken: Bool { oidc.contains("offline_access") }
    var wantsIDToken: Bool { oidc.contains("openid") }

    enum Problem: Error { case severalResources, empty }

    /// Splits a space-separated scope string.
    /// - Throws: `Problem.severalResources` for scopes of more than one resource (AADSTS28000),
    ///   `Problem.empty` for no scope at all.
    static func parse(_ text: String) throws(Problem) -> RequestedScopes {
        var result = RequestedScopes(resource: nil, permissions: [], oidc: [])
        let items = text.split(whereSeparator: { $0 == " " || $0 == "+" }).map(String.init)
        guard !items.isEmpty else { throw .empty }
        for item in items {
            if oidcScopes.contains(item.lowercased()) {
                result.oidc.insert(item.lowercased())
                continue
            }
            let (resource, permission) = split(item)
            if let existing = result.resource, !existing.caseInsensitiveEquals(resource) { throw .severalResources }
            result.resource = result.resource ?? resource
            if !result.permissions.contains(where: { $0.caseInsensitiveEquals(permission) }) { result.permissions.append(permission) }
        }
        return result
    }

    /// (resource, permission) of one scope; Graph's aliases become `https://graph.microsoft.com`.
    static func split(_ scope: String) -> (resource: String, permission: String) {
        guard let slash = scope.lastIndex(of: "/") else { return (graphResource, scope) }
        var resource = String(scope[..<slash])
        let permission = String(scope[scope.index(after: slash)...])
        let trimmed = resource.hasSuffix("/") ? String(resource.dropLast()) : resource
        if trimmed.caseInsensitiveEquals(graphResource) || trimmed.caseInsensitiveEquals(graphAppID) {
            resource = graphResource
        }
        return (resource, permission)
    }

    /// The scope as the platform writes it back in a token response: Graph permissions bare,
    /// others as full URIs.
    func responseForm(of permission: String) -> String {
        guard let resource, !isGraph else { return permission }
        return resource + "/" + permission
    }

    /// The `aud` of an access token for `resource`: Graph's app id for Graph, the app id for
    /// `api://{app id}`, else the resource URI itself.
    static func audience(of resource: String) -> String {
        if resource == graphResource { return graphAppID }
        if resource.lowercased().hasPrefix("api://") { return String(resource.dropFirst("api://".count)) }
        return resource
    }
}
