import IdentityCore
import TokenRelayBase

extension RelayError {
    /// The request members that chose a request's scopes and authority: what a 400 input problem
    /// the identity platform decided names as its `field` (behaviour §4.1, §4.3).
    package struct InputFields: Sendable, Equatable {
        /// `scopes`, or the legacy `resource` when the request gave that instead.
        package var scopes = "scopes"
        /// `authority`, or `tenant_id` when that chose the authority (`/v1/tokens/app`). Also
        /// `authority` when the request named none (the configured default, an account's own):
        /// it is the member that would choose another.
        package var authority = "authority"

        package init() {}
    }

    /// Names the `field` of a 400 `invalid_scope` or `invalid_authority` that has none (behaviour
    /// §4.1: input errors name their field). Those made from an STS answer (AADSTS70011,
    /// AADSTS90002, …; §4.3) know nothing of the request; TokenRelay's own refusals name theirs
    /// already and keep it.
    package mutating func nameInput(_ fields: InputFields = InputFields()) {
        guard code == .invalidScope || code == .invalidAuthority, extensions["field"] == nil else { return }
        extensions["field"] = .string(code == .invalidScope ? fields.scopes : fields.authority)
    }
}
