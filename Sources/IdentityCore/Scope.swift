/// One scope split into its resource and its permission name.
///
/// `https://graph.microsoft.com/User.Read` and `User.Read` are the same scope (behaviour §1:
/// unprefixed scopes belong to Microsoft Graph; MSAL Android #672). The resource is everything
/// before the last `/`, so `https://management.core.windows.net//.default` has the resource
/// `https://management.core.windows.net/`.
struct Scope: Sendable, Hashable {
    static let graph = "https://graph.microsoft.com"

    let resource: String
    let name: String

    /// - Parameters:
    ///   - text: a trimmed, non-empty scope.
    ///   - defaultResource: resource of an unprefixed scope (Graph on requests).
    init(_ text: String, defaultResource: String = Scope.graph) {
        // ASCII text (every scope seen in practice) searched on its bytes, where an ASCII `/` is a
        // character of its own: the same index, without a `Character` search (about 3k
        // instructions a scope; a forced refresh normalises four sets, behaviour §10).
        let slash = text.utf8.allSatisfy { $0 < 0x80 } ? text.utf8.lastIndex(of: UInt8(ascii: "/")) : text.lastIndex(of: "/")
        if let slash {
            let resource = String(text[..<slash])
            let name = String(text[text.index(after: slash)...])
            if resource.lowercased() == Scope.graph {
                self.resource = Scope.graph
            } else {
                self.resource = resource
            }
            self.name = name
        } else {
            self.resource = defaultResource
            self.name = text
        }
    }

    /// Why the platform could grant no such scope, nil when it could: a permission name is
    /// not empty, and a resource is an absolute URI with a host (`https://graph.microsoft.com`,
    /// `api://{app id}`, `https://database.windows.net/` of `…//.default`) or an application id
    /// (`{app id}/.default`). `/.default`, `https:///User.Read`, `api://` and
    /// `https://graph.microsoft.com/` name none: refused before any call, since the platform would
    /// only decline them ("Scopes and permissions in the Microsoft identity platform": a permission
    /// is appended to the resource's identifier; the platform takes everything before the last `/`
    /// as the resource).
    var malformation: String? {
        if name.isEmpty { return "names no permission after its last '/'" }
        if resource.isEmpty { return "names no resource before '/\(name)'" }
        if let separator = resource.range(of: "://") {
            let host = resource[separator.upperBound...].prefix { $0 != "/" }
            if resource[..<separator.lowerBound].isEmpty || host.isEmpty { return "names a resource URI without a host" }
        } else if resource.hasPrefix("/") || resource.firstIndex(of: ":").map({ resource[resource.index(after: $0)...].first ?? "/" }) == "/" {
            // `//x`, `/x`, `api:/`: a path with no resource, or a scheme with nothing after it.
            return "names no resource: '\(resource)' is neither an absolute URI nor an application id"
        }
        return nil
    }

    var isDefault: Bool { name.lowercased() == ".default" }
    var isGraph: Bool { resource == Scope.graph }

    /// Canonical text: Graph permissions short (`User.Read`), everything else (including
    /// Graph's `/.default`) as a full URI.
    var canonical: String { isGraph && !isDefault ? name : fullURI }
    /// The form sent to the STS.
    var fullURI: String { "\(resource)/\(name)" }
    var resourceKey: String { resource.lowercased() }
}
