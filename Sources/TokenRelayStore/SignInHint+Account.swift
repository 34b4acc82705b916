import TokenRelayBase

extension SignInHint {
    /// The sign-in that lets `account` get `scopes` (with `claims`) silently again: bound to the
    /// account's user (`home_account_id`, behaviour §3.8) once a redemption has confirmed it.
    package init(account: AccountRecord, scopes: [String], claims: String?, authority: String? = nil, prompt: String? = nil) {
        self.init(
            loginHint: account.username, scopes: scopes, claims: claims, authority: authority ?? account.authority, prompt: prompt,
            homeAccountId: account.homeAccountId)
    }
}
