import Foundation
import IdentityCore
import Synchronization
import TokenRelayBase
import TokenRelayStore

/// This replica's copy of the suspended tenants (behaviour §12 Tenants; the rows are in
/// `tenant_suspensions`), so every token route, the cached path on the server thread included
/// (ADR 0013), refuses a suspended tenant without I/O.
///
/// Kept current by the replica notifications `tenant.suspended` / `tenant.resumed`
/// (``ReplicaInvalidation``, ADR 0011), by a full reload every `TOKENRELAY_CACHE_TTL_S` and
/// after the listener comes back from a gap (``TenantSuspensionReloader``). While PostgreSQL is
/// unreachable the last set read stays in force: a suspended tenant stays refused and no
/// suspension can be written meanwhile (the routes need the database).
///
/// A tenant is matched case-insensitively (stored lower-cased). An account is "of" a tenant
/// when that tenant is its realm, its home tenant (the utid of `home_account_id`) or the realm of
/// any tenant profile.
package final class TenantSuspensions: Sendable {
    private struct State {
        var suspended: Set<String> = []
        /// Counts changes; a reload read before a change is not applied after it.
        var generation: UInt64 = 0
    }

    private let state = Mutex(State())
    /// `state.suspended.count`, written under the lock: the usual check (nothing suspended) reads
    /// only this, so the cached path's server threads do not contend for the lock.
    private let count = Atomic<Int>(0)
    /// Run with a tenant that became suspended here: drops what memory holds of it.
    private let dropHooks = Mutex<[@Sendable (String) -> Void]>([])

    package init(suspended: Set<String> = []) {
        state.withLock { state in
            state.suspended = Set(suspended.map { $0.lowercased() })
            count.store(state.suspended.count, ordering: .releasing)
        }
    }

    /// Registers what forgets a tenant in memory when it is suspended (its accounts, access
    /// tokens, app and on-behalf-of tokens).
    package func onSuspended(_ hook: @escaping @Sendable (String) -> Void) { dropHooks.withLock { $0.append(hook) } }

    /// The suspended tenants, sorted (readiness, tests).
    package var tenants: [String] { state.withLock { $0.suspended.sorted() } }

    /// Taken before reading the table, handed to ``replace(with:readAt:)``.
    package var generation: UInt64 { state.withLock { $0.generation } }

    /// Whether `tenantId` is suspended (case-insensitive).
    package func isSuspended(_ tenantId: String) -> Bool {
        guard count.load(ordering: .acquiring) > 0 else { return false }
        return state.withLock { $0.suspended.contains(tenantId.lowercased()) }
    }

    /// The suspended tenant `account` is of, or nil. The usual case (nothing suspended) is one
    /// atomic load: no lock, no string work.
    package func suspendedTenant(of account: AccountRecord) -> String? {
        guard count.load(ordering: .acquiring) > 0 else { return nil }
        let tenants = account.tenantIds
        return state.withLock { state in tenants.first { state.suspended.contains($0) } }
    }

    /// - Throws: `RelayError` 403 `tenant_suspended` when `account` is of a suspended tenant.
    package func check(_ account: AccountRecord) throws(RelayError) {
        if let tenant = suspendedTenant(of: account) { throw Self.problem(tenant) }
    }

    /// - Throws: `RelayError` 403 `tenant_suspended` when `tenantId` is suspended.
    package func check(tenant tenantId: String) throws(RelayError) {
        if isSuspended(tenantId) { throw Self.problem(tenantId.lowercased()) }
    }

    /// 403 `tenant_suspended` naming the tenant (behaviour §4, §12 Tenants).
    package static func problem(_ tenantId: String) -> RelayError {
        RelayError(
            .tenantSuspended, "The tenant '\(tenantId)' is suspended by the operator; no token is issued for it until it is resumed.",
            extensions: ["tenant_id": .string(tenantId)])
    }

    /// Applies one change (this replica's own write or another's notification).
    package func apply(tenantId: String, suspended: Bool) {
        let tenant = tenantId.lowercased()
        let added = state.withLock { state in
            state.generation &+= 1
            defer { count.store(state.suspended.count, ordering: .releasing) }
            if suspended { return state.suspended.insert(tenant).inserted }
            state.suspended.remove(tenant)
            return false
        }
        if added { drop(tenant) }
    }

    /// Replaces the set by a full read begun at `generation` (``generation``); skipped when a
    /// change arrived since (it is newer than the read).
    /// - Returns: whether the read was applied.
    @discardableResult
    package func replace(with tenants: Set<String>, readAt generation: UInt64) -> Bool {
        let lowered = Set(tenants.map { $0.lowercased() })
        let added: Set<String>? = state.withLock { state in
            guard state.generation == generation else { return nil }
            let added = lowered.subtracting(state.suspended)
            state.suspended = lowered
            state.generation &+= 1
            count.store(lowered.count, ordering: .releasing)
            return added
        }
        guard let added else { return false }
        for tenant in added { drop(tenant) }
        return true
    }

    private func drop(_ tenant: String) {
        for hook in dropHooks.withLock({ $0 }) { hook(tenant) }
    }
}

extension AccountRecord {
    /// The tenants the account is of, lower-cased: its realm, its home tenant (the utid of
    /// `home_account_id`, `{uid}.{utid}`) and every tenant profile's realm (behaviour §12 Tenants).
    package var tenantIds: Set<String> {
        var tenants: Set<String> = [realm.lowercased()]
        if let home = homeAccountId, let dot = home.lastIndex(of: ".") { tenants.insert(home[home.index(after: dot)...].lowercased()) }
        for profile in tenantProfiles { tenants.insert(profile.realm.lowercased()) }
        return tenants
    }
}

/// Reads `tenant_suspensions` into ``TenantSuspensions``: once before serving, every
/// `intervalSeconds` (the bound on staleness when a notification is missed), and when asked
/// after the listener comes back from a gap. A failed read is logged and the set kept.
package struct TenantSuspensionReloader: Service {
    package let store: TenantStore
    package let suspensions: TenantSuspensions
    /// Seconds between reloads (`TOKENRELAY_CACHE_TTL_S`). Default 30.
    package var intervalSeconds: Int = 30
    package let logger: Logger

    package init(store: TenantStore, suspensions: TenantSuspensions, intervalSeconds: Int = 30, logger: Logger) {
        self.store = store
        self.suspensions = suspensions
        self.intervalSeconds = intervalSeconds
        self.logger = logger
    }

    package func run() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(Double(intervalSeconds)))
            guard !Task.isCancelled else { return }
            await reload()
        }
    }

    /// One full read; on failure the set in memory stays (behaviour §12 Tenants: during a
    /// PostgreSQL outage the last suspensions read stay in force).
    /// - Returns: whether the read succeeded.
    @discardableResult
    package func reload() async -> Bool {
        let generation = suspensions.generation
        do {
            suspensions.replace(with: try await store.suspendedTenants(), readAt: generation)
            return true
        } catch {
            logger.warn("tenants.reload_failed", ["error": String(describing: type(of: error))])
            return false
        }
    }
}
