import Foundation
import HTTPCommon
import IdentityCore
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelaySignIn
import TokenRelayStore
import TokenRelayUpstream

/// `POST /v1/sign-ins`, `GET /v1/sign-ins/callback` and `GET /v1/sign-ins/{sign_in_id}` (behaviour §3).
package enum SignInRoutes {
    package static let startFields: Set<String> = [
        "scopes", "authority", "login_hint", "prompt", "claims", "redirect_after", "external_id", "account_id",
    ]
    package static let prompts: Set<String> = ["select_account", "login", "consent", "none"]

    package static func register(on router: inout Router, _ services: AppServices) {
        router.add("POST", "/v1/sign-ins", access: .requires(.accountsWrite), body: .json) { request in
            let body = request.body
            try body.rejectUnknown(allowed: startFields)
            let scopes = try TokenRoutes.requestedScopes(body)
            try request.context.access.check(scopes, field: "scopes")
            // The account the sign-in is for (behaviour §3.8): only its user may complete it.
            var account: AccountRecord?
            if let accountId = try body.identifier("account_id") {
                guard let found = try await services.store.account(id: accountId, owner: request.context.owner), request.context.access.sees(found)
                else {
                    throw RelayError(.accountNotFound, "No account matches 'account_id'.", extensions: ["field": .string("account_id")])
                }
                account = found
            }
            var authority = try body.string("authority").map { text throws(RelayError) in try services.authorities.validate(text, field: "authority") }
            if authority == nil, let account {
                // The account's own authority, as its sign_in_url names (an authority no longer
                // accepted falls back to the default one).
                authority = try? services.authorities.validate(account.authority, field: "authority")
            }
            // The authority the user will sign in at, the default one included: a tenant-limited
            // key could otherwise sign a user of another tenant in (and replace that account's
            // refresh token) by naming none. `common` or `organizations` is no tenant of a key's.
            try request.context.access.check(authority: authority ?? services.signIns.defaultAuthority)
            let prompt = try body.string("prompt")
            if let prompt, !prompts.contains(prompt) {
                throw RelayError.invalidRequest(field: "prompt", "'prompt' must be one of select_account, login, consent, none.")
            }
            let loginHint = try body.string("login_hint") ?? account?.username
            // An empty hint names no user, as an empty identifier names no account: refused, not
            // sent to the authority as `login_hint=` (found by a new-user try).
            if let loginHint, loginHint.isEmpty || loginHint.utf8.count > 256 || loginHint.containsControlCharacter || loginHint.containsBidiControl {
                throw RelayError.invalidRequest(
                    field: "login_hint",
                    "'login_hint' must be 1 to 256 bytes without control or bidirectional formatting characters; leave it out to name no user.")
            }
            let externalId = try body.externalId(owner: request.context.owner)
            let started = try await services.signIns.start(
                SignInService.StartRequest(
                    scopes: scopes, authority: authority, loginHint: loginHint, prompt: prompt,
                    claims: try body.claims("claims"), redirectAfter: try body.string("redirect_after"), startedBy: request.context.caller,
                    externalId: externalId, expectedHomeAccountId: account?.homeAccountId, expectedAccountId: account?.accountId))
            let expiresAt = Date(timeIntervalSince1970: TimeInterval(started.expiresAt))
            return .json(
                201,
                .object([
                    "authorize_url": .string(started.authorizeURL),
                    "sign_in_id": .string(started.signInId),
                    "expires_at": .string(expiresAt.formatted(.iso8601)),
                ]))
        }

        // The identity platform adds parameters of its own to `code` and `state` (`session_state`,
        // `client_info`, `cloud_instance_name`, `iss`, ...): ignored, as RFC 6749 §4.1.2 asks.
        // A person's browser comes here: it gets readable pages (`BrowserPage`), API callers JSON.
        router.add("GET", "/v1/sign-ins/callback", access: .open, query: .any, page: true) { request in
            // RFC 6749 §3.1: a parameter given twice (two `code`s, two `state`s) is refused.
            let query = try request.http.uniqueQuery()
            // `HEAD` (link checkers, prefetches) is safe (RFC 9110 §9.2.1): it checks the callback
            // and leaves the sign-in pending, as `HEAD` on a signed link leaves the link unused.
            if request.http.method == "HEAD" {
                try await services.signIns.checkCallback(query: query)
                return HTTPResponse(status: 204, headers: ["Cache-Control": "no-store"])
            }
            let completion = try await services.signIns.complete(query: query, context: request.context)
            switch completion {
            case .account(let account, let owner, _):
                if BrowserPage.wanted(by: request.http.headers) {
                    return BrowserPage.signedIn(username: account.username, accountId: account.accountId)
                }
                return .json(200, .object(["account": account.json(owner: owner)]))
            case .redirect(let location, _):
                return HTTPResponse(status: 303, headers: ["Location": location, "Cache-Control": "no-store"])
            }
        }

        // Where a sign-in stands (behaviour §3.9): its starter, or any `accounts:read` key.
        router.add(
            "GET", "/v1/sign-ins/{sign_in_id}", access: .requiresAny([.accountsRead, .accountsWrite]), query: .only(["wait"])
        ) { request in
            var wait = 0
            if let text = try request.http.onlyQueryValue("wait") {
                wait = try IntegerText.parse(text, field: "wait", in: 0...SignInService.longestWait, unit: "seconds")
            }
            let outcome = try await services.signIns.follow(
                request.parameter("sign_in_id"), waitSeconds: wait, reader: request.context.caller, readsAccounts: request.context.readsAccounts)
            return .json(200, json(outcome))
        }
    }

    /// The sign-in object of `GET /v1/sign-ins/{sign_in_id}` (schema `SignIn` in openapi.yaml).
    package static func json(_ outcome: SignInOutcome) -> JSONValue {
        var object: [String: JSONValue] = [
            "sign_in_id": .string(outcome.signInId), "status": .string(outcome.status.rawValue),
            "expires_at": .string(Date(timeIntervalSince1970: TimeInterval(outcome.expiresAt)).formatted(.iso8601)),
        ]
        if outcome.status == .completed {
            object["account_id"] = outcome.accountId.map(JSONValue.string) ?? .null
            object["created"] = outcome.created.map(JSONValue.bool) ?? .null
        }
        if outcome.status == .failed { object["problem"] = outcome.problem ?? .null }
        return .object(object)
    }
}
