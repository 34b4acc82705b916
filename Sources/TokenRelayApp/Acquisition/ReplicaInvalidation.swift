import Foundation
import PostgresBridge
import Synchronization

/// Cross-replica invalidation (behaviour §8, §12 Memories and replicas): what one replica changes in
/// PostgreSQL, every other replica stops serving from memory within about a second.
///
/// Writers send a ``Message`` with `pg_notify` inside their transaction (``ReplicaNotifications``);
/// each replica LISTENs on a dedicated direct connection (`TOKENRELAY_DATABASE_LISTEN_URL`) and
/// runs the hooks registered here. While the listener is down, the memories' TTL
/// (`TOKENRELAY_CACHE_TTL_S`) bounds staleness; when it comes back after a gap, the
/// ``onResynchronise(_:)`` hooks drop whatever a missed message could have invalidated.
///
/// The hook points, in one place:
/// - ``onAccountForgotten(_:)``: the account was deleted, signed in again or its refresh token
///   died: forget every memory of it (access tokens, account record, declined scopes,
///   UI-required and throttle memories: each memory registers its `forget(accountId:)`).
/// - ``onAccessTokensReplaced(_:)``: a token was fetched with claims (a claims challenge): drop
///   the account's in-memory access tokens (the persistent cache holds the new one).
/// - ``onAPIKeyRevoked(_:)``: the key must be refused at once.
/// - ``onRefreshReleased(_:)``: a redemption lease was released: refreshes waiting for it claim again.
/// - ``onTenantChanged(_:)``: a tenant was suspended or resumed (``TenantSuspensions``).
/// - ``onTenantForgotten(_:)``: a tenant's data key was destroyed (ADR 0017).
/// - ``onResynchronise(_:)``: notifications may have been missed.
final class ReplicaInvalidation: Sendable {
    /// This process's name in payloads (`kind:id origin`): a replica skips its own messages, whose
    /// hooks it already ran (re-running them would drop the token it just stored).
    static let origin = String(UUID().uuidString.prefix(8)).lowercased()

    /// One invalidation, as carried in a NOTIFY payload (`kind:id origin`, well under the 8000-byte limit).
    enum Message: Sendable, Equatable {
        case accountDeleted(String)
        case accountSignedIn(String)
        /// Account state changed (refresh token dead).
        case accountChanged(String)
        case accessTokensReplaced(String)
        case apiKeyRevoked(String)
        /// A key was created: its id joins every replica's key directory.
        case apiKeyCreated(String)
        /// A redemption of the account's refresh token ended and its lease is free: waiters on
        /// other replicas claim again at once instead of at their next poll (ADR 0012).
        case refreshReleased(String)
        /// A tenant (lower-cased GUID) was suspended or resumed (behaviour §12 Tenants).
        case tenantSuspended(String)
        case tenantResumed(String)
        /// A tenant was forgotten (`token-relay tenants forget`): drop its data key and memories.
        case tenantForgotten(String)

        static let accountDeletedPrefix = "account.deleted:"
        static let apiKeyRevokedPrefix = "api_key.revoked:"
        static let apiKeyCreatedPrefix = "api_key.created:"

        /// The payload sent, naming this process as the origin.
        var payload: String { body + " " + ReplicaInvalidation.origin }

        private var body: String {
            switch self {
            case .accountDeleted(let id): Self.accountDeletedPrefix + id
            case .accountSignedIn(let id): "account.signed_in:" + id
            case .accountChanged(let id): "account.changed:" + id
            case .accessTokensReplaced(let id): "tokens.replaced:" + id
            case .apiKeyRevoked(let id): Self.apiKeyRevokedPrefix + id
            case .apiKeyCreated(let id): Self.apiKeyCreatedPrefix + id
            case .refreshReleased(let id): "refresh.released:" + id
            case .tenantSuspended(let id): "tenant.suspended:" + id
            case .tenantResumed(let id): "tenant.resumed:" + id
            case .tenantForgotten(let id): "tenant.forgotten:" + id
            }
        }

        /// Whether the process that sent it applies it too (a key's creation: see ``handle(_:)``).
        var reachesItsOrigin: Bool {
            if case .apiKeyCreated = self { return true }
            return false
        }

        /// The metric label of the message kind.
        var kind: String { String(body.prefix { $0 != ":" }) }

        /// The origin named by `payload`, nil when it names none.
        static func origin(of payload: String) -> String? {
            let parts = payload.split(separator: " ", maxSplits: 1)
            return parts.count == 2 ? String(parts[1]) : nil
        }

        /// Parses a payload (its origin dropped); nil for one this version does not know (a newer replica's).
        init?(payload: String) {
            let payload = payload.split(separator: " ", maxSplits: 1).first.map(String.init) ?? ""
            guard let colon = payload.firstIndex(of: ":") else { return nil }
            let id = String(payload[payload.index(after: colon)...])
            guard !id.isEmpty else { return nil }
            switch payload[..<colon] {
            case "account.deleted": self = .accountDeleted(id)
            case "account.signed_in": self = .accountSignedIn(id)
            case "account.changed": self = .accountChanged(id)
            case "tokens.replaced": self = .accessTokensReplaced(id)
            case "api_key.revoked": self = .apiKeyRevoked(id)
            case "api_key.created": self = .apiKeyCreated(id)
            case "refresh.released": self = .refreshReleased(id)
            case "tenant.suspended": self = .tenantSuspended(id)
            case "tenant.resumed": self = .tenantResumed(id)
            case "tenant.forgotten": self = .tenantForgotten(id)
            default: return nil
            }
        }
    }

    private struct Hooks {
        var account: [@Sendable (String) -> Void] = []
        var accessTokens: [@Sendable (String) -> Void] = []
        var apiKey: [@Sendable (String) -> Void] = []
        var apiKeyCreated: [@Sendable (String) -> Void] = []
        var listening: [@Sendable () -> Void] = []
        var resynchronise: [@Sendable () -> Void] = []
        var refreshReleased: [@Sendable (String) -> Void] = []
        var tenant: [@Sendable (String, Bool) -> Void] = []
        var tenantForgotten: [@Sendable (String) -> Void] = []
    }

    private let hooks = Mutex(Hooks())
    private let listener = Mutex<PostgresListener?>(nil)
    /// Whether the loss of the current outage was logged (one line per outage, not per retry).
    private let lossLogged = Mutex(false)
    private let metrics: Metrics
    private let logger: Logger

    init(metrics: Metrics, logger: Logger) {
        self.metrics = metrics
        self.logger = logger
        metrics.describe("tokenrelay_invalidations_received_total", "counter", "Cross-replica invalidation messages received, by kind.")
        metrics.describe("tokenrelay_invalidation_listener_reconnects_total", "counter", "LISTEN sessions re-established after a loss.")
    }

    func onAccountForgotten(_ hook: @escaping @Sendable (String) -> Void) { hooks.withLock { $0.account.append(hook) } }
    func onAccessTokensReplaced(_ hook: @escaping @Sendable (String) -> Void) { hooks.withLock { $0.accessTokens.append(hook) } }
    func onAPIKeyRevoked(_ hook: @escaping @Sendable (String) -> Void) { hooks.withLock { $0.apiKey.append(hook) } }
    func onAPIKeyCreated(_ hook: @escaping @Sendable (String) -> Void) { hooks.withLock { $0.apiKeyCreated.append(hook) } }
    /// Called each time notifications start flowing: the first time and after every gap.
    func onListening(_ hook: @escaping @Sendable () -> Void) { hooks.withLock { $0.listening.append(hook) } }
    func onRefreshReleased(_ hook: @escaping @Sendable (String) -> Void) { hooks.withLock { $0.refreshReleased.append(hook) } }
    /// `hook(tenantId, suspended)`.
    func onTenantChanged(_ hook: @escaping @Sendable (String, Bool) -> Void) { hooks.withLock { $0.tenant.append(hook) } }
    func onTenantForgotten(_ hook: @escaping @Sendable (String) -> Void) { hooks.withLock { $0.tenantForgotten.append(hook) } }
    func onResynchronise(_ hook: @escaping @Sendable () -> Void) { hooks.withLock { $0.resynchronise.append(hook) } }

    /// Runs the hooks `message` calls for (also used for this replica's own changes).
    func apply(_ message: Message) {
        let hooks = self.hooks.withLock { $0 }
        metrics.increment("tokenrelay_invalidations_received_total", ["kind": message.kind])
        switch message {
        case .accountDeleted(let id), .accountSignedIn(let id), .accountChanged(let id):
            for hook in hooks.account { hook(id) }
        case .accessTokensReplaced(let id):
            for hook in hooks.accessTokens { hook(id) }
        case .apiKeyRevoked(let id):
            for hook in hooks.apiKey { hook(id) }
        case .apiKeyCreated(let id):
            for hook in hooks.apiKeyCreated { hook(id) }
        case .refreshReleased(let id):
            for hook in hooks.refreshReleased { hook(id) }
        case .tenantSuspended(let id):
            for hook in hooks.tenant { hook(id, true) }
        case .tenantResumed(let id):
            for hook in hooks.tenant { hook(id, false) }
        case .tenantForgotten(let id):
            for hook in hooks.tenantForgotten { hook(id) }
        }
    }

    /// Starts listening on `url` (a direct connection); a no-op when already listening.
    func start(url: String) {
        let created = listener.withLock { current -> PostgresListener? in
            guard current == nil else { return nil }
            let made = PostgresListener(url: url, channels: [ReplicaNotifications.channel]) { [weak self] event in
                self?.handle(event)
            }
            current = made
            return made
        }
        created?.start()
    }

    /// Whether notifications flow now (readiness shows it; the TTL covers the rest).
    var isListening: Bool { listener.withLock { $0 }?.isListening ?? false }

    func stop() {
        listener.withLock { $0 }?.stop()
    }

    private func handle(_ event: PostgresListener.Event) {
        switch event {
        case .notification(let channel, let payload):
            // This process applies its own changes as it makes them, except a key's creation,
            // which the creating call (the CLI's, a test's) does not hand to the key directory.
            guard channel == ReplicaNotifications.channel, let message = Message(payload: payload) else { return }
            if Message.origin(of: payload) == Self.origin, !message.reachesItsOrigin { return }
            apply(message)
        case .listening(let afterGap):
            lossLogged.withLock { $0 = false }
            for hook in hooks.withLock({ $0.listening }) { hook() }
            guard afterGap else { return }
            metrics.increment("tokenrelay_invalidation_listener_reconnects_total")
            logger.info("invalidation.listening_again", [:])
            for hook in hooks.withLock({ $0.resynchronise }) { hook() }
        case .disconnected(let reason):
            let first = lossLogged.withLock { logged in
                defer { logged = true }
                return !logged
            }
            if first { logger.warn("invalidation.listener_lost", ["error": reason]) }
        }
    }
}
