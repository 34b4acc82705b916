/// What a `sign_in_url` asks for: the same parameters as `POST /v1/sign-ins` (behaviour §3), filled
/// from the account and the request that needs interaction.
struct SignInHint: Sendable, Equatable {
    /// The account's username (`login_hint`); nil when unknown.
    var loginHint: String?
    /// Canonical scopes to sign in (and consent) for.
    var scopes: [String]
    /// The claims request (JSON text) the authority must satisfy, without client capabilities
    /// (the sign-in adds them).
    var claims: String?
    /// The account's authority URL; nil for the default authority.
    var authority: String?
    /// `select_account|login|consent|none`; nil lets the authority decide.
    var prompt: String?
}

extension SignInHint {
    /// The sign-in that lets `account` get `scopes` (with `claims`) silently again.
    init(account: AccountRecord, scopes: [String], claims: String?, authority: String? = nil, prompt: String? = nil) {
        self.init(loginHint: account.username, scopes: scopes, claims: claims, authority: authority ?? account.authority, prompt: prompt)
    }
}
