import Foundation

/// A normalised, order-free, case-insensitive set of resource scopes (behaviour §1 "Scopes",
/// §12 "canonical").
///
/// Graph scopes are kept short (`User.Read`), other resources' scopes as full URIs, the OIDC
/// scopes (`openid profile offline_access email`) removed, duplicates (case-insensitive)
/// removed, sorted case-insensitively.
public struct ScopeSet: Sendable, Hashable {
    /// The canonical scopes, sorted.
    public let canonical: [String]
    let scopes: [Scope]

    /// Normalises scopes without request validation (use for stored or granted sets).
    /// - Parameters:
    ///   - scopes: scopes; elements may hold several space-separated scopes.
    ///   - defaultResource: resource of unprefixed scopes (Graph unless told otherwise).
    public init(normalizing scopes: [String], defaultResource: String = "https://graph.microsoft.com") {
        // Each scope's canonical text and its lower-cased key made once, not again for every
        // comparison of the sort and for the result; a few scopes compared in a list rather than
        // hashed into a set (a forced refresh normalises four sets of one or two, behaviour §10).
        var kept: [(scope: Scope, canonical: String, key: String)] = []
        var seen = Set<String>()
        for element in scopes {
            for text in Self.tokens(of: element) {
                if text.utf8.count <= ScopeRules.longestReserved, ScopeRules.reserved.contains(text.lowercased()) { continue }
                let scope = Scope(text, defaultResource: defaultResource)
                let canonical = scope.canonical
                let key = canonical.lowercased()
                if kept.count < Self.comparedInList {
                    if kept.contains(where: { $0.key == key }) { continue }
                } else {
                    if seen.isEmpty { seen = Set(kept.map(\.key)) }
                    guard seen.insert(key).inserted else { continue }
                }
                kept.append((scope, canonical, key))
            }
        }
        kept.sort { lhs, rhs in lhs.key == rhs.key ? lhs.canonical < rhs.canonical : lhs.key < rhs.key }
        self.scopes = kept.map(\.scope)
        self.canonical = kept.map(\.canonical)
    }

    /// Up to this many scopes, a new one is compared with those kept in order instead of a set's hashing.
    static let comparedInList = 8

    /// The scopes in one element, split at spaces, tabs and line breaks. Split by Unicode scalar:
    /// split by `Character`, "\r\n" is one character that is none of the four, and stayed inside
    /// a scope.
    static func tokens(of element: String) -> [String] {
        element.unicodeScalars.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }).map(String.init)
    }

    /// Empty set.
    public static let empty = ScopeSet(normalizing: [])

    public var isEmpty: Bool { canonical.isEmpty }

    /// Lower-cased canonical scopes joined by one space: the cache key's target part.
    public var cacheKey: String { canonical.map { $0.lowercased() }.joined(separator: " ") }

    /// The resource of the set (`https://graph.microsoft.com` for Graph), nil when empty.
    public var resource: String? { scopes.first?.resource }

    /// True when the set asks for `{resource}/.default`.
    public var isDefaultScope: Bool { scopes.contains { $0.isDefault } }

    /// True when every scope of `other` is in this set (case-insensitive): the cache rule
    /// "served from an entry whose target is a superset" (behaviour §1).
    public func isSuperset(of other: ScopeSet) -> Bool {
        Set(canonical.map { $0.lowercased() }).isSuperset(of: other.canonical.map { $0.lowercased() })
    }

    /// The `scope` parameter for a user-token request: full URIs plus
    /// `openid profile offline_access` (behaviour §1: added to every user-token request).
    public var wireValue: String {
        // Written into one string: each scope's URI made, then the list joined, cost three times
        // as much (every refresh sends it, behaviour §10).
        var out = ""
        out.reserveCapacity(scopes.reduce(29) { $0 + $1.resource.utf8.count + $1.name.utf8.count + 2 })
        for scope in scopes {
            out += scope.resource
            out += "/"
            out += scope.name
            out += " "
        }
        out += "openid profile offline_access"
        return out
    }

    /// The `scope` parameter without OIDC scopes (client credentials, behaviour §2 `tokens/app`).
    public var resourceWireValue: String {
        scopes.map(\.fullURI).joined(separator: " ")
    }

    public static func == (lhs: ScopeSet, rhs: ScopeSet) -> Bool { lhs.cacheKey == rhs.cacheKey }
    public func hash(into hasher: inout Hasher) { hasher.combine(cacheKey) }
}
