import TokenRelayBase

/// What an API key may do (behaviour §7, §12 Permissions).
public enum Permission: String, Sendable, CaseIterable {
    case tokensAcquire = "tokens:acquire"
    case accountsRead = "accounts:read"
    case accountsWrite = "accounts:write"
    case downstreamCall = "downstream:call"
    case admin
}

/// behaviour §12 Permissions as a table: which permission a route needs, from its method and path
/// template. Routes declare their access when they register; a test checks every registered
/// route against this table, so a new route (e.g. `POST /v1/tokens/app`, `GET /v1/events`,
/// `POST /v1/accounts/import`) needs no change here unless it opens a new family.
package enum RoutePermissions {
    /// (method or `*`, path prefix, access); the first matching row wins.
    package static let table: [(method: String, prefix: String, access: RouteAccess)] = [
        ("*", "/healthz", .open),
        ("*", "/readyz", .open),
        ("*", "/metrics", .open),
        // The callback is the registered redirect URI; `start` URLs are signed (behaviour §3).
        ("*", "/v1/sign-ins/callback", .open),
        ("*", "/v1/sign-ins/start", .open),
        // A sign-in's outcome: its starter (`accounts:write`) or any `accounts:read` key; the
        // route tells which (behaviour §3.9).
        ("GET", "/v1/sign-ins/", .requiresAny([.accountsRead, .accountsWrite])),
        ("*", "/v1/tokens/", .requires(.tokensAcquire)),
        ("GET", "/v1/accounts", .requires(.accountsRead)),
        ("GET", "/v1/events", .requires(.accountsRead)),
        ("*", "/v1/accounts", .requires(.accountsWrite)),
        ("*", "/v1/sign-ins", .requires(.accountsWrite)),
        ("*", "/v1/downstream/", .requires(.downstreamCall)),
        ("*", "/v1/downstream-encoded/", .requires(.downstreamCall)),
        ("*", "/v1/api-keys", .requires(.admin)),
        ("*", "/v1/encryption", .requires(.admin)),
        ("*", "/v1/tenants", .requires(.admin)),
    ]

    /// The access behaviour §12 gives `method` on `template`; `admin` for anything the table does not
    /// name (a route nobody classified is closed, not open).
    package static func access(method: String, template: String) -> RouteAccess {
        for row in table where row.method == "*" || row.method == method {
            if template == row.prefix || template.hasPrefix(row.prefix.hasSuffix("/") ? row.prefix : row.prefix + "/") {
                return row.access
            }
        }
        return .requires(.admin)
    }
}

/// Who may call a route (behaviour §11, §12 Permissions).
package enum RouteAccess: Sendable, Equatable {
    /// No API key: health, readiness, metrics, the sign-in callback.
    case open
    /// An API key with this permission.
    case requires(Permission)
    /// An API key with any of these permissions (the route checks further).
    case requiresAny([Permission])

    /// The permissions of which a key needs one; nil for an open route.
    package var permissions: [Permission]? {
        switch self {
        case .open: nil
        case .requires(let permission): [permission]
        case .requiresAny(let permissions): permissions
        }
    }
}
