import TokenRelayBase
import TokenRelayStore

extension JSONBody {
    /// The body's `external_id` for a caller of `owner` (behaviour §3.7); nil when absent or null.
    /// - Throws: `RelayError` 400 `invalid_request` naming `external_id` (not a string, or against
    ///   the rules of ``ExternalId/validated(_:owner:field:)``); 500 when the route has no caller.
    package func externalId(owner: String?) throws(RelayError) -> ExternalId? {
        guard let text = try string("external_id") else { return nil }
        guard let owner else { throw RelayError(.internal, "An external id needs the caller's API key.") }
        return try ExternalId.validated(text, owner: owner)
    }
}
