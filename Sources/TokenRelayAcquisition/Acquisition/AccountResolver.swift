import TokenRelayBase
import TokenRelayStore
import TokenRelayUpstream

/// Finds the account a token request names (behaviour §2.2, §3, §12 Accounts): by `account_id`
/// (this replica's memory first), `home_account_id` or `username` (narrowed by `tenant_id`).
/// An `account_id` value is an account id, else an import alias, else the caller's owner's
/// external id (behaviour §3.7).
package struct AccountResolver: Sendable {
    package let store: TokenStore
    package let accounts: AccountCache

    package init(store: TokenStore, accounts: AccountCache) {
        self.store = store
        self.accounts = accounts
    }

    /// The account a value given as `account_id` names, from this replica's memory alone: an
    /// account id it holds, else an external id of `owner` it resolved recently. Nil when the
    /// database must be asked. A value shaped like an account id (``ExternalId/looksLikeAccountId(_:)``)
    /// is never an external id; only other values pay the second lookup.
    package func accountFromMemory(_ value: String, owner: String?) -> AccountRecord? {
        if let cached = accounts.account(id: value) { return cached }
        return accountFromMemory(externalId: value, owner: owner)
    }

    /// ``accountFromMemory(_:owner:)`` with whether a `last_used_at` touch is due at `now` (Unix
    /// seconds; ``AccountCache/accountAndTouchDue(id:now:)``, true for an account found by external id).
    package func accountFromMemory(_ value: String, owner: String?, now: Int) -> (account: AccountRecord, touchDue: Bool)? {
        if let cached = accounts.accountAndTouchDue(id: value, now: now) { return cached }
        return accountFromMemory(externalId: value, owner: owner).map { ($0, true) }
    }

    private func accountFromMemory(externalId value: String, owner: String?) -> AccountRecord? {
        guard let owner, !ExternalId.looksLikeAccountId(value) else { return nil }
        return accounts.account(externalId: ExternalId(owner: owner, value: value))
    }

    /// The account id of an external id memory resolves, for `selector` to be replaced by, so
    /// that every later step (memory answers on the server thread, the suspended step) reads the
    /// same account (ADR 0013: nothing derived twice); nil when `selector` stays as it is.
    package func resolvedFromMemory(_ selector: SilentTokenRequest.AccountSelector, owner: String?) -> SilentTokenRequest.AccountSelector? {
        guard case .accountId(let value) = selector, let owner, !ExternalId.looksLikeAccountId(value), accounts.account(id: value) == nil,
            let account = accounts.account(externalId: ExternalId(owner: owner, value: value))
        else { return nil }
        return .accountId(account.accountId)
    }

    /// Finds the account named by `selector`.
    /// - Parameter owner: the caller's key name, whose external ids an `account_id` may name; nil: none.
    /// - Throws: `RelayError` 404 `account_not_found`, 409 `ambiguous_account` with `account_ids`.
    package func resolve(_ selector: SilentTokenRequest.AccountSelector, owner: String? = nil) async throws -> AccountRecord {
        switch selector {
        case .accountId(let id):
            return try await byAccountId(id, owner: owner, readingTokens: false).account
        case .homeAccountId(let home):
            // One home_account_id may be signed in through several clouds (environments).
            return try Self.single(try await store.accounts(homeAccountId: home), "home_account_id")
        case .username(let username, let tenantId):
            return try Self.single(try await store.accounts(username: username, tenantId: tenantId, owner: owner), "username; narrow by tenant_id")
        }
    }

    /// The account a value given as `account_id` names, from memory, else from PostgreSQL (then
    /// remembered). With `readingTokens`, an account read from PostgreSQL comes with its stored
    /// access tokens in its own environment and realm, read by the same statement
    /// (``TokenStore/accountWithAccessTokens(id:owner:)``: one round trip for a token only
    /// PostgreSQL holds, issue 13).
    /// - Parameter owner: the caller's key name, whose external ids `id` may be; nil: none.
    /// - Returns: the account, and its tokens when they were read (nil: memory gave the account,
    ///   or the tokens were not read).
    /// - Throws: `RelayError` 404 `account_not_found`.
    package func byAccountId(_ id: String, owner: String?, readingTokens: Bool) async throws -> (account: AccountRecord, tokens: [StoredAccessToken]?) {
        if let cached = accountFromMemory(id, owner: owner) { return (cached, nil) }
        let mark = accounts.readMark
        let read: (account: AccountRecord, accessTokens: [StoredAccessToken]?)?
        if readingTokens {
            read = try await store.accountWithAccessTokens(id: id, owner: owner)
        } else {
            read = try await store.account(id: id, owner: owner).map { ($0, nil) }
        }
        guard let (account, tokens) = read else { throw RelayError.accountNotFound() }
        accounts.store(account, readMark: mark)
        if let owner, account.accountId != id { accounts.remember(ExternalId(owner: owner, value: id), of: account) }
        return (account, tokens)
    }

    /// Finds the account named by `selector` among those the caller's key sees (an account
    /// outside the key's tenants, or another owner's unconfirmed import, is 404, and never named
    /// in an `ambiguous_account` answer).
    /// - Throws: `RelayError` 404 `account_not_found`, 409 `ambiguous_account` with `account_ids`.
    package func resolve(_ selector: SilentTokenRequest.AccountSelector, visibleTo access: KeyAccess, owner: String? = nil) async throws -> AccountRecord {
        // By `home_account_id` or `username` the store already leaves other owners' unconfirmed
        // imports out (they have no `home_account_id`; ``TokenStore/provenOr(_:of:)``).
        if case .accountId = selector {} else if !access.limitsTenants { return try await resolve(selector, owner: owner) }
        switch selector {
        case .accountId:
            let account = try await resolve(selector, owner: owner)
            guard access.sees(account) else { throw RelayError.accountNotFound() }
            return account
        case .homeAccountId(let home):
            return try Self.single(try await store.accounts(homeAccountId: home).filter(access.sees), "home_account_id")
        case .username(let username, let tenantId):
            return try Self.single(
                try await store.accounts(username: username, tenantId: tenantId, owner: owner).filter(access.sees), "username; narrow by tenant_id")
        }
    }

    /// The one match, or 404 / 409 `ambiguous_account` with `account_ids`.
    private static func single(_ matches: [AccountRecord], _ what: String) throws -> AccountRecord {
        guard let first = matches.first else { throw RelayError.accountNotFound() }
        guard matches.count == 1 else {
            throw RelayError(
                .ambiguousAccount, "Several accounts match this \(what), or pass account_id.",
                extensions: ["account_ids": .array(matches.map { .string($0.accountId) })])
        }
        return first
    }
}
