import Synchronization

/// The redemption leases this replica holds now (account and owner of each), so a shutdown can
/// release what is still held once its drain is over (ADR 0012: a rolling deployment never leaves
/// a lease to run out). Registered at the claim, forgotten when a statement ended the lease
/// (stored, released, fenced out, marked dead).
package final class HeldLeases: Sendable {
    private let leases = Mutex([String: String]())

    package init() {}

    /// `owner` holds the lease of `accountId`.
    package func hold(accountId: String, owner: String) {
        leases.withLock { $0[owner] = accountId }
    }

    /// `owner`'s lease ended (or was never taken).
    package func ended(owner: String) {
        leases.withLock { $0[owner] = nil }
    }

    /// Every lease held now, as (account, owner).
    package var all: [(accountId: String, owner: String)] {
        leases.withLock { $0.map { (accountId: $0.value, owner: $0.key) } }
    }
}
