import Synchronization
import TokenRelayBase

/// The ids of every active API key, held by a replica so that a key id nobody created is refused
/// without asking PostgreSQL (behaviour §7.1; issue 32: a new random key id cost a database read
/// each, 0.66 ms, so anyone could make every request one).
///
/// Remembering unknown ids cannot do that (an attacker picks a new one each time), so the replica
/// remembers the known ones instead: few, chosen by the operator, bounded by ``limit`` (past it the
/// directory is not used and every unknown id is asked of the store as before). It is trusted only
/// while notifications flow (``ReplicaInvalidation/isListening``): it is loaded each time the
/// `LISTEN` connection is (re)established, a key's creation reaches it by `NOTIFY` in the inserting
/// statement (`api_key.created`, within the 2 s of §12.23), and a revocation takes the id out. A
/// creation notified while a load runs is kept across it.
package final class KeyDirectory: Sendable {
    private struct State {
        var ids: Set<String>?
        var loading = 0
        var createdWhileLoading: Set<String> = []
    }

    /// Most key ids held; with more active keys the directory stays unused.
    package let limit: Int
    private let state = Mutex(State())
    /// Whether notifications flow now; the directory answers only then.
    private let trusted: @Sendable () -> Bool

    package init(limit: Int = 100_000, trusted: @escaping @Sendable () -> Bool) {
        self.limit = limit
        self.trusted = trusted
    }

    /// Whether `keyId` is certainly not an active key: the directory is loaded, trusted, and
    /// does not hold it. False when the store must be asked.
    package func certainlyUnknown(_ keyId: String) -> Bool {
        guard trusted() else { return false }
        return state.withLock { state in state.ids.map { !$0.contains(keyId) } ?? false }
    }

    /// A key was created (here or on another replica, by notification).
    package func created(_ keyId: String) {
        state.withLock { state in
            state.ids?.insert(keyId)
            if state.loading > 0 { state.createdWhileLoading.insert(keyId) }
        }
    }

    /// A key was revoked.
    package func revoked(_ keyId: String) {
        state.withLock { _ = $0.ids?.remove(keyId) }
    }

    /// Forgets every id until the next ``load(_:)`` (notifications may have been missed).
    package func invalidate() {
        state.withLock { $0.ids = nil }
    }

    /// Reads every active key id (`read` gives at most `limit + 1`); more than ``limit`` leaves
    /// the directory unused. A failed read leaves it unloaded.
    package func load(_ read: @Sendable (Int) async throws -> [String]) async {
        state.withLock { state in
            state.ids = nil
            state.loading += 1
        }
        let ids = try? await read(limit + 1)
        state.withLock { state in
            state.loading -= 1
            if let ids, ids.count <= limit {
                state.ids = Set(ids).union(state.createdWhileLoading)
            }
            if state.loading == 0 { state.createdWhileLoading = [] }
        }
    }

    /// Ids held now, nil when not loaded (tests, metrics).
    package var count: Int? { state.withLock { $0.ids?.count } }
}
