/// Finds the account a token request names (behaviour §2.2, §3, §12 Accounts): by `account_id`
/// (this replica's memory first), `home_account_id` or `username` (narrowed by `tenant_id`).
struct AccountResolver: Sendable {
    let store: TokenStore
    let accounts: AccountCache

    /// Finds the account named by `selector`.
    /// - Throws: `Problem` 404 `account_not_found`, 409 `ambiguous_account` with `account_ids`.
    func resolve(_ selector: SilentTokenRequest.AccountSelector) async throws -> AccountRecord {
        switch selector {
        case .accountId(let id):
            if let cached = accounts.account(id: id) { return cached }
            let mark = accounts.readMark
            guard let account = try await store.account(id: id) else { throw Problem.accountNotFound() }
            accounts.store(account, readMark: mark)
            return account
        case .homeAccountId(let home):
            // One home_account_id may be signed in through several clouds (environments).
            return try Self.single(try await store.accounts(homeAccountId: home), "home_account_id")
        case .username(let username, let tenantId):
            return try Self.single(try await store.accounts(username: username, tenantId: tenantId), "username; narrow by tenant_id")
        }
    }

    /// Finds the account named by `selector` among those the caller's key sees (an account
    /// outside the key's tenants is 404, and never named in an `ambiguous_account` answer).
    /// - Throws: `Problem` 404 `account_not_found`, 409 `ambiguous_account` with `account_ids`.
    func resolve(_ selector: SilentTokenRequest.AccountSelector, visibleTo access: KeyAccess) async throws -> AccountRecord {
        guard access.limitsTenants else { return try await resolve(selector) }
        switch selector {
        case .accountId:
            let account = try await resolve(selector)
            guard access.sees(account) else { throw Problem.accountNotFound() }
            return account
        case .homeAccountId(let home):
            return try Self.single(try await store.accounts(homeAccountId: home).filter(access.sees), "home_account_id")
        case .username(let username, let tenantId):
            return try Self.single(try await store.accounts(username: username, tenantId: tenantId).filter(access.sees), "username; narrow by tenant_id")
        }
    }

    /// The one match, or 404 / 409 `ambiguous_account` with `account_ids`.
    private static func single(_ matches: [AccountRecord], _ what: String) throws -> AccountRecord {
        guard let first = matches.first else { throw Problem.accountNotFound() }
        guard matches.count == 1 else {
            throw Problem(
                .ambiguousAccount, "Several accounts match this \(what), or pass account_id.",
                extensions: ["account_ids": .array(matches.map { .string($0.accountId) })])
        }
        return first
    }
}
