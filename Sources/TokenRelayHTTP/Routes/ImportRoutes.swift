import HTTPCommon
import IdentityCore
import TokenRelayBase

/// `POST /v1/accounts/import` (behaviour §3, §12 Accounts): one-time migration of an ADAL-era refresh
/// token. The account is known by username only until its first silent acquisition. 201 for a
/// new account; 200 when a pending import of the same username (same cloud and tenant) took the new token.
package enum ImportRoutes {
    package static let fields: Set<String> = ["username", "refresh_token", "authority", "resource", "external_id"]

    package static func register(on router: inout Router, _ services: AppServices) {
        router.add("POST", "/v1/accounts/import", access: .requires(.accountsWrite), body: .json) { request in
            let body = request.body
            try body.rejectUnknown(allowed: fields)
            let username = try body.requiredString("username").trimmingCharacters(in: .whitespaces)
            // Control characters are refused as `GET /v1/accounts?username=` refuses them, so an
            // imported account can always be found by its username; bidirectional formatting
            // characters because the username is shown in lists and audit rows, where one makes it
            // read as another (no UPN holds one).
            guard !username.isEmpty, username.utf8.count <= 512, !username.containsControlCharacter, !username.containsBidiControl
            else {
                throw RelayError.invalidRequest(
                    field: "username", "'username' must be a non-empty UPN of at most 512 bytes without control or bidirectional formatting characters.")
            }
            let refreshToken = try body.requiredString("refresh_token")
            // A token is visible ASCII (RFC 6749 Appendix A.17 `refresh-token = 1*VSCHAR`, space
            // aside): a line break, NUL or only spaces went on to the STS as given.
            guard !refreshToken.isEmpty, refreshToken.utf8.count <= 16_384, refreshToken.utf8.allSatisfy(\.isASCIIVisible) else {
                throw RelayError.invalidRequest(
                    field: "refresh_token", "'refresh_token' must be a non-empty token of at most 16384 bytes of visible ASCII, without spaces.")
            }
            let authority = try services.authorities.validate(try body.requiredString("authority"), field: "authority")
            // A tenant-limited key may not plant an account in another tenant (behaviour §12 Permissions).
            try request.context.access.check(authority: authority)
            var detail: [String: JSONValue] = ["authority": .string(authority.url)]
            if let resource = try body.string("resource") {
                // ADAL tokens were issued per resource: checked as `{resource}/.default` (behaviour §1).
                let scopes: ScopeSet
                do throws(ScopeError) {
                    scopes = try ScopeRules.requested(scopes: nil, resource: resource)
                } catch {
                    throw RelayError(.invalidScope, error.detail, extensions: ["field": .string(error.field)])
                }
                try request.context.access.check(scopes, field: "resource")
                detail["scopes"] = .array(scopes.canonical.map(JSONValue.string))
            }
            let externalId = try body.externalId(owner: request.context.owner)
            let (account, created) = try await services.store.importAccount(
                username: username, authority: authority, refreshToken: refreshToken, actor: request.context.caller ?? "unknown", detail: detail,
                externalId: externalId, owner: request.context.owner)
            // A pending import of the same username got the new token: it leaves the STS's answers
            // for the old one behind.
            if !created { services.tokens.forgetInMemory(account.accountId) }
            services.tokens.logger.info(
                "account.imported", ["account.id": account.accountId, "import.created": String(created), "correlation.id": request.context.correlationId])
            var response = HTTPResponse.json(created ? 201 : 200, account.json(owner: request.context.owner))
            response.headers.set("Location", "/v1/accounts/\(account.accountId)")
            return response
        }
    }
}
