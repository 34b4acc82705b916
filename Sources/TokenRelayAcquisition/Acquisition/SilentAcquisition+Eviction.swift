import TokenRelayBase
import TokenRelayStore

extension SilentAcquisition {
    /// Forgets an access token a resource refused with a claims challenge (behaviour §6, case 18), in this
    /// replica's memory and in the persistent cache, so neither this request nor a later one is
    /// served the revoked token again.
    package func evict(_ token: StoredAccessToken) async {
        memory.remove(token)
        do {
            try await store.evictAccessToken(token)
        } catch {
            logger.warn("token.evict_failed", ["account.id": token.accountId, "error": String(describing: type(of: error))])
        }
    }
}
