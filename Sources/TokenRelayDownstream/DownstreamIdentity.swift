import HTTPCommon
import IdentityCore
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayUpstream

/// Whose token a downstream call carries (behaviour §6), from exactly one identity header:
/// `X-Account-Id` (a held account, silent acquisition), `X-App-Only: true` (the service's own
/// app token for the API's `app_scopes`), or `X-On-Behalf-Of-Assertion` (the caller's incoming
/// user token, exchanged on-behalf-of for the API's delegated `scopes`).
package enum DownstreamIdentity: Sendable, Equatable {
    case account(String)
    case app
    case onBehalfOf(assertion: String)

    package static let headerNames = ["X-Account-Id", "X-App-Only", "X-On-Behalf-Of-Assertion"]

    /// Whose token a throttle-memory entry is for: the account id, `app`, or `obo:` and the
    /// assertion's SHA-256 (never the assertion itself).
    package var throttleIdentity: String {
        switch self {
        case .account(let id): id
        case .app: "app"
        case .onBehalfOf(let assertion): GrantTokenService.onBehalfOfOwner(assertion)
        }
    }

    /// The header that names this identity.
    package var headerName: String {
        switch self {
        case .account: "X-Account-Id"
        case .app: "X-App-Only"
        case .onBehalfOf: "X-On-Behalf-Of-Assertion"
        }
    }

    /// The account id of an `X-Account-Id` call; nil for the app and on-behalf-of.
    package var accountId: String? {
        if case .account(let id) = self { id } else { nil }
    }

    /// The identity the request's headers name.
    /// - Throws: `RelayError` 400 `invalid_request` for none or several identity headers, an empty
    ///   value, or `X-App-Only` other than `true`.
    package static func from(_ headers: HTTPHeaders) throws(RelayError) -> DownstreamIdentity {
        let given = headerNames.filter { headers.contains($0) }
        guard given.count == 1 else {
            throw RelayError.invalidRequest(
                field: given.first ?? "X-Account-Id",
                given.isEmpty
                    ? "Name the identity of the call with one header: 'X-Account-Id', 'X-App-Only: true' or 'X-On-Behalf-Of-Assertion'."
                    : "Send exactly one identity header; got \(given.joined(separator: ", ")).")
        }
        let value = (try headers.only(given[0]) ?? "").trimmingCharacters(in: .whitespaces)
        switch given[0] {
        case "X-Account-Id":
            guard !value.isEmpty else { throw RelayError.invalidRequest(field: "X-Account-Id", "'X-Account-Id' is empty.") }
            return .account(value)
        case "X-App-Only":
            guard value.lowercased() == "true" else { throw RelayError.invalidRequest(field: "X-App-Only", "'X-App-Only' must be 'true'.") }
            return .app
        default:
            // The header may carry the caller's whole `Authorization` value.
            let scheme = value.prefix { $0 != " " }
            let token = scheme.lowercased() == "bearer" ? String(value.dropFirst(scheme.count)).trimmingCharacters(in: .whitespaces) : value
            guard !token.isEmpty else {
                throw RelayError.invalidRequest(field: "X-On-Behalf-Of-Assertion", "'X-On-Behalf-Of-Assertion' is empty.")
            }
            return .onBehalfOf(assertion: token)
        }
    }

    /// The token for an app-only or on-behalf-of call to `api`; nil for an account, whose token
    /// (with its claims-challenge handling) comes from the silent path.
    /// - Throws: `RelayError` from the grant (an expired assertion is 400 on
    ///   `X-On-Behalf-Of-Assertion`), or 500 when the API's configured scopes are invalid.
    package func grantToken(for api: DownstreamAPI, named name: String, grants: GrantTokenService, context: RequestContext) async throws -> String? {
        switch self {
        case .account:
            return nil
        case .app:
            let scopes = try Self.scopes(api.effectiveAppScopes, api: name)
            return try await grants.acquireApp(GrantTokenService.Request(scopes: scopes), context: context).token.secret
        case .onBehalfOf(let assertion):
            let scopes = try Self.scopes(api.scopes, api: name)
            do {
                return try await grants.acquireOnBehalfOf(assertion: assertion, GrantTokenService.Request(scopes: scopes), context: context).token.secret
            } catch var problem as RelayError where problem.extensions["field"] == .string("assertion") {
                problem.extensions["field"] = .string("X-On-Behalf-Of-Assertion")
                throw problem
            }
        }
    }

    /// The scopes configured for `api`, parsed.
    /// - Throws: `RelayError` 500 when they are invalid (a configuration error, not the caller's).
    package static func scopes(_ configured: [String], api: String) throws(RelayError) -> ScopeSet {
        do {
            return try ScopeRules.requested(scopes: configured, resource: nil)
        } catch {
            throw RelayError(.internal, "The scopes configured for '\(api)' are invalid.")
        }
    }
}

extension DownstreamAPI {
    /// `app_scopes`, else `{origin}/.default` of `base_url` (behaviour §11).
    package var effectiveAppScopes: [String] {
        if let appScopes, !appScopes.isEmpty { return appScopes }
        return [Self.origin(of: baseURL) + "/.default"]
    }

    /// `scheme://host[:port]` of `url`.
    package static func origin(of url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        let rest = url[schemeEnd.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return String(url[..<schemeEnd.upperBound]) + authority
    }
}
