import IdentityCore
import TokenRelayBase
import TokenRelayStore

extension AuthorityValidator {
    /// The authority to redeem an account's refresh token at and the realm whose tokens it
    /// yields (behaviour §1, §12 Accounts: access tokens are kept per realm). Another tenant of the
    /// same cloud is a separate realm (a guest account); another cloud is not this account's.
    /// - Parameter requested: the request's `authority`; nil means the account's own.
    /// - Throws: `RelayError` 400 `invalid_authority` when the authority's environment is not the
    ///   account's; 409 `interaction_required` when the account's own authority is no longer accepted.
    package func authorityAndRealm(_ requested: Authority?, for account: AccountRecord) throws -> (Authority, String) {
        guard let requested else {
            do {
                return (try validate(account.authority), account.realm)
            } catch {
                // Trust in that authority was withdrawn (configuration changed): only a new sign-in
                // through an accepted authority can help.
                throw RelayError(
                    .interactionRequired, "The account's authority is no longer accepted (\(error.detail)); sign the user in again.",
                    extensions: ["account_state": .string(account.state.rawValue)])
            }
        }
        guard requested.environment == account.environment else {
            throw RelayError(
                .invalidAuthority, "The account belongs to \(account.environment); this authority is in \(requested.environment).",
                extensions: ["field": .string("authority")])
        }
        // The account's own tenant, however it is written (domain or GUID, with or without `tfp`),
        // is the account's realm: one cache partition per tenant.
        let ownTenant = (try? validate(account.authority))?.tenant
        if requested.isMultiTenant || requested.tenant.caseInsensitiveCompare(ownTenant ?? "") == .orderedSame
            || requested.tenant.caseInsensitiveCompare(account.realm) == .orderedSame
        {
            return (requested, account.realm)
        }
        return (requested, requested.tenant.lowercased())
    }
}
