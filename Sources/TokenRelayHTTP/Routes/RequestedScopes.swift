import IdentityCore
import Synchronization
import TokenRelayBase

/// `ScopeRules.requested` remembered for the few scope lists callers actually send: the rule
/// is a pure function, and normalising (trimming, lower-casing, sorting) cost a tenth of the
/// cached silent path (behaviour §10). Only accepted lists are kept; a rejected one is re-checked
/// every time so its error stays exact.
package final class RequestedScopes: Sendable {
    package init() {}

    private struct Key: Hashable {
        let scopes: [String]?
        let resource: String?
    }

    package static let shared = RequestedScopes()

    /// Distinct lists remembered before the memo starts over (a bound on memory, not a tuning knob).
    package static let capacity = 256
    private let memo = Mutex<[Key: ScopeSet]>([:])

    /// The same as `ScopeRules.requested(scopes:resource:)`.
    /// - Throws: `ScopeError` naming the field, as `ScopeRules.requested` does.
    package func normalize(scopes: [String]?, resource: String?) throws(ScopeError) -> ScopeSet {
        let key = Key(scopes: scopes, resource: resource)
        if let known = memo.withLock({ $0[key] }) { return known }
        let set = try ScopeRules.requested(scopes: scopes, resource: resource)
        memo.withLock { memo in
            if memo.count >= Self.capacity { memo.removeAll(keepingCapacity: true) }
            memo[key] = set
        }
        return set
    }
}
