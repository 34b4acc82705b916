import CryptoBridge
import Foundation
import HTTPCommon
import IdentityCore
import TokenRelayBase
import TokenRelayStore
import TokenRelayUpstream

/// `GET /v1/accounts`, `GET /v1/accounts/{account_id}`, `DELETE /v1/accounts/{account_id}` (behaviour §3).
package enum AccountRoutes {
    package static func register(on router: inout Router, _ services: AppServices) {
        ImportRoutes.register(on: &router, services)
        router.add(
            "GET", "/v1/accounts", access: .requires(.accountsRead), query: .only(["username", "tenant_id", "state", "failure_class", "cursor", "limit"])
        ) { request in
            // Every value is bounded text (`username`'s rule, ``AccountLookupRules/username(_:)``);
            // `tenant_id` has its own (shorter, ASCII), so it says the same as on the silent route.
            for item in request.http.query where item.name != "tenant_id" { _ = try AccountLookupRules.boundedText(item.value, field: item.name) }
            let limit = try request.http.pageLimit()
            var after: String?
            if let cursor = try request.http.onlyQueryValue("cursor"), !cursor.isEmpty {
                guard let decoded = Cursor.decode(cursor) else {
                    throw RelayError.invalidRequest(field: "cursor", "'cursor' is not a cursor this service issued.")
                }
                after = decoded
            }
            let username = try request.http.onlyQueryValue("username").flatMap { $0.isEmpty ? nil : $0 }
            let tenantId = try request.http.onlyQueryValue("tenant_id").flatMap { $0.isEmpty ? nil : $0 }.map(AccountLookupRules.tenantId)
            // An empty `state=` or `failure_class=` is no filter the caller can mean: 400 as any other value.
            let state = try request.http.onlyQueryValue("state").map { value in
                guard let state = AccountRecord.State(rawValue: value) else {
                    throw RelayError.invalidRequest(field: "state", "'state' must be active or interaction_required.")
                }
                return state
            }
            let failureClass = try request.http.onlyQueryValue("failure_class").map { value in
                guard let failureClass = FailureClass(rawValue: value) else {
                    let classes = FailureClass.allCases.map(\.rawValue).joined(separator: ", ")
                    throw RelayError.invalidRequest(field: "failure_class", "'failure_class' must be one of \(classes).")
                }
                return failureClass
            }
            let access = request.context.access
            if let tenantId { try access.check(tenant: tenantId, field: "tenant_id") }
            // One row more than asked tells whether another page exists.
            var page = try await services.store.listAccounts(
                username: username, tenantId: tenantId, afterAccountId: after, limit: limit + 1,
                visibleTenants: access.visibleTenants, owner: request.context.owner, state: state, failureClass: failureClass)
            var next: JSONValue = .null
            if page.count > limit {
                page.removeLast()
                next = .string(Cursor.encode(page.last!.accountId))
            }
            let owner = request.context.owner
            let health = try await services.store.accountHealth(
                accountIds: page.map(\.accountId), keepAliveAfterDays: services.configuration.keepAlive.afterDays)
            let accounts = page.map { withHealth($0.json(owner: owner), health[$0.accountId]) }
            return .json(200, .object(["accounts": .array(accounts), "next_cursor": next]))
        }

        // `{account_id}` is an account id, an import alias or the caller's owner's external id
        // (behaviour §3.7), resolved in that order.
        router.add("GET", "/v1/accounts/{account_id}", access: .requires(.accountsRead)) { request in
            let owner = request.context.owner
            guard let account = try await services.store.account(id: request.parameter("account_id"), owner: owner), request.context.access.sees(account)
            else {
                throw RelayError.accountNotFound(field: "account_id")
            }
            let health = try await services.store.accountHealth(
                accountIds: [account.accountId], keepAliveAfterDays: services.configuration.keepAlive.afterDays)
            return .json(200, withHealth(account.json(owner: owner), health[account.accountId]))
        }

        router.add("DELETE", "/v1/accounts/{account_id}", access: .requires(.accountsWrite)) { request in
            // An imported account's id may be an alias of the account it merged into, and the
            // value may be the caller's owner's external id (behaviour §3.7); deleting the account
            // frees its external ids.
            let accountId = try await services.store.canonicalAccountId(request.parameter("account_id"), owner: request.context.owner)
            // An account outside the key's tenants, or another owner's unconfirmed import, is
            // invisible: 204 without touching it, as for an unknown id (an absent one goes on, and
            // its attempt is audited as `absent`).
            if request.context.access.limitsTenants || request.context.access.owner != nil,
                let account = try await services.store.account(id: accountId), !request.context.access.sees(account)
            {
                return HTTPResponse(status: 204)
            }
            // Signs out in TokenRelay only; nothing is revoked at Microsoft (behaviour §12 Accounts).
            let deleted = try await services.store.deleteAccount(id: accountId, actor: request.context.caller)
            // Forgotten before anything else can fail, so this replica never serves a deleted account.
            services.tokens.forgetInMemory(accountId)
            try await services.audit.record(
                .accountDeleted, actor: request.context.caller ?? "unknown", accountId: accountId, outcome: deleted ? "deleted" : "absent")
            return HTTPResponse(status: 204)
        }
    }

    /// The account object of the account routes: with `health` (behaviour §3.8), which the
    /// account part of a token answer leaves out (it is encoded once per account, §10).
    package static func withHealth(_ account: JSONValue, _ health: JSONValue?) -> JSONValue {
        guard case .object(var members) = account else { return account }
        members["health"] = health ?? .null
        return .object(members)
    }

    /// Opaque page cursor (``PageCursor``) of the last account id seen.
    package enum Cursor {
        package static func encode(_ accountId: String) -> String { PageCursor.encode(accountId, prefix: "a:") }
        package static func decode(_ cursor: String) -> String? { PageCursor.decode(cursor, prefix: "a:") }
    }
}
