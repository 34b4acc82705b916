import IdentityCore
import TokenRelayBase

extension IDTokenClaims {
    /// The non-secret standard claims kept with the account, as JSON text (behaviour §12
    /// Accounts): what a sign-in and an import's first redemption store alike.
    package var publicJSON: String {
        let keep: Set<String> = [
            "iss", "tid", "oid", "sub", "preferred_username", "name", "emails", "email", "given_name", "family_name", "ver", "idp", "tfp", "acr", "iat",
            "auth_time",
        ]
        return String(decoding: JSONWriter.encode(.object(all.filter { keep.contains($0.key) })), as: UTF8.self)
    }
}
