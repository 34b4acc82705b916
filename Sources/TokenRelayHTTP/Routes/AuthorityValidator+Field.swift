import IdentityCore
import TokenRelayBase

extension AuthorityValidator {
    /// Validates an authority a request gave, as the routes answer it.
    /// - Parameters:
    ///   - url: the authority URL from the request.
    ///   - field: the request field it came from, named in the error.
    /// - Returns: the validated authority.
    /// - Throws: `RelayError` 400 `invalid_authority` naming `field`.
    package func validate(_ url: String, field: String) throws(RelayError) -> Authority {
        do {
            return try validate(url)
        } catch {
            throw RelayError(.invalidAuthority, error.detail, extensions: ["field": .string(field)])
        }
    }
}
