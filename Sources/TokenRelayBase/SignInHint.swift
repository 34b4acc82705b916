import IdentityCore

/// What a `sign_in_url` asks for: the same parameters as `POST /v1/sign-ins` (behaviour §3), filled
/// from the account and the request that needs interaction.
package struct SignInHint: Sendable, Equatable {
    /// The account's username (`login_hint`); nil when unknown.
    package var loginHint: String?
    /// Canonical scopes to sign in (and consent) for.
    package var scopes: [String]
    /// The claims request (JSON text) the authority must satisfy, without client capabilities
    /// (the sign-in adds them).
    package var claims: String?
    /// The account's authority URL; nil for the default authority.
    package var authority: String?
    /// `select_account|login|consent|none`; nil lets the authority decide.
    package var prompt: String?
    /// Where the callback sends the browser once signed in (behaviour §3.1); nil answers the account.
    package var redirectAfter: String? = nil
    /// The `home_account_id` of the account the link is for: the callback refuses any other user
    /// (behaviour §3.8, 409 `user_mismatch`); nil leaves the link open to any user.
    package var homeAccountId: String? = nil

    package init(
        loginHint: String? = nil, scopes: [String], claims: String? = nil, authority: String? = nil, prompt: String? = nil, redirectAfter: String? = nil,
        homeAccountId: String? = nil
    ) {
        self.loginHint = loginHint
        self.scopes = scopes
        self.claims = claims
        self.authority = authority
        self.prompt = prompt
        self.redirectAfter = redirectAfter
        self.homeAccountId = homeAccountId
    }
}

extension SignInHint {
    /// The claims a sign-in link must carry for `problem`: the challenge the problem holds (the
    /// STS's or a resource's `claims`, behaviour §12 Problems) merged into the caller's own claims
    /// request, so the user meets the challenge at the authority and the next silent request does
    /// not fail the same way (issue 10 item 1; identity platform "Claims challenges, claims
    /// requests, and client capabilities": the challenge goes in the `claims` parameter of the
    /// interactive request). Client capabilities are added when the sign-in starts.
    package static func claims(for problem: RelayError, requested: String?) -> String? {
        ClaimsRequest.combined(requested, challenge: problem.extensions["claims"]?.stringValue)
    }

}
