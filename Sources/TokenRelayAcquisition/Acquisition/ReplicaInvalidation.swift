import Foundation
import PostgresBridge
import Synchronization
import TokenRelayBase
import TokenRelayStore

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
/// - ``onSignInFinished(_:)``: a sign-in completed or failed: its followers read it again.
/// - ``onResynchronise(_:)``: notifications may have been missed.
package final class ReplicaInvalidation: Sendable {
    /// This process's name in payloads (``ReplicaNotifications/origin``).
    package static var origin: String { ReplicaNotifications.origin }

    package typealias Message = ReplicaNotifications.Message

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
        var signInFinished: [@Sendable (String) -> Void] = []
    }

    private let hooks = Mutex(Hooks())
    private let listener = Mutex<PostgresListener?>(nil)
    /// Whether the loss of the current outage was logged (one line per outage, not per retry).
    private let lossLogged = Mutex(false)
    private let metrics: Metrics
    private let logger: Logger

    package init(metrics: Metrics, logger: Logger) {
        self.metrics = metrics
        self.logger = logger
        metrics.describe("tokenrelay_invalidations_received_total", "counter", "Cross-replica invalidation messages received, by kind.")
        metrics.describe("tokenrelay_invalidation_listener_reconnects_total", "counter", "LISTEN sessions re-established after a loss.", series: [[:]])
    }

    package func onAccountForgotten(_ hook: @escaping @Sendable (String) -> Void) { hooks.withLock { $0.account.append(hook) } }
    package func onAccessTokensReplaced(_ hook: @escaping @Sendable (String) -> Void) { hooks.withLock { $0.accessTokens.append(hook) } }
    package func onAPIKeyRevoked(_ hook: @escaping @Sendable (String) -> Void) { hooks.withLock { $0.apiKey.append(hook) } }
    package func onAPIKeyCreated(_ hook: @escaping @Sendable (String) -> Void) { hooks.withLock { $0.apiKeyCreated.append(hook) } }
    /// Called each time notifications start flowing: the first time and after every gap.
    package func onListening(_ hook: @escaping @Sendable () -> Void) { hooks.withLock { $0.listening.append(hook) } }
    package func onRefreshReleased(_ hook: @escaping @Sendable (String) -> Void) { hooks.withLock { $0.refreshReleased.append(hook) } }
    /// `hook(tenantId, suspended)`.
    package func onTenantChanged(_ hook: @escaping @Sendable (String, Bool) -> Void) { hooks.withLock { $0.tenant.append(hook) } }
    package func onTenantForgotten(_ hook: @escaping @Sendable (String) -> Void) { hooks.withLock { $0.tenantForgotten.append(hook) } }
    /// A sign-in completed or failed (on any replica, this one included).
    package func onSignInFinished(_ hook: @escaping @Sendable (String) -> Void) { hooks.withLock { $0.signInFinished.append(hook) } }
    package func onResynchronise(_ hook: @escaping @Sendable () -> Void) { hooks.withLock { $0.resynchronise.append(hook) } }

    /// Runs the hooks `message` calls for (also used for this replica's own changes).
    package func apply(_ message: Message) {
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
        case .signInFinished(let id):
            for hook in hooks.signInFinished { hook(id) }
        }
    }

    /// Starts listening on `url` (a direct connection); a no-op when already listening.
    package func start(url: String) {
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
    package var isListening: Bool { listener.withLock { $0 }?.isListening ?? false }

    package func stop() {
        listener.withLock { $0 }?.stop()
    }

    private func handle(_ event: PostgresListener.Event) {
        switch event {
        case .notification(let channel, let payload):
            // This process applies its own changes as it makes them, except a key's creation,
            // which the creating call (the CLI's, a test's) does not hand to the key directory.
            guard channel == ReplicaNotifications.channel, let message = Message(payload: payload) else { return }
            if Message.isFrom(Self.origin, payload), !message.reachesItsOrigin { return }
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
