import Foundation
import PostgresBridge
import TokenRelayBase

/// The SQL side of cross-replica invalidation (behaviour §8, §12 Memories and replicas): every write
/// that makes what other replicas hold in memory stale sends a `NOTIFY` inside its own
/// transaction, so it is delivered at COMMIT and only then (PostgreSQL docs, NOTIFY).
package enum ReplicaNotifications {
    /// The channel every replica listens on.
    package static let channel = "tokenrelay_invalidation"

    /// This process's name in payloads (`kind:id origin`): a replica skips its own messages, whose
    /// hooks it already ran (re-running them would drop the token it just stored).
    package static let origin = String(UUID().uuidString.prefix(8)).lowercased()

    /// One invalidation, as carried in a NOTIFY payload (`kind:id origin`, well under the 8000-byte limit).
    package enum Message: Sendable, Equatable {
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
        /// A sign-in completed or failed: whoever waits for it (`GET /v1/sign-ins/{id}?wait=`,
        /// behaviour §3.9), on any replica, reads it again.
        case signInFinished(String)

        package static let accountDeletedPrefix = "account.deleted:"
        package static let apiKeyRevokedPrefix = "api_key.revoked:"
        package static let apiKeyCreatedPrefix = "api_key.created:"

        /// The payload sent, naming this process as the origin.
        package var payload: String { body + " " + ReplicaNotifications.origin }

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
            case .signInFinished(let id): "sign_in.finished:" + id
            }
        }

        /// Whether the process that sent it applies it too (a key's creation: see
        /// ``ReplicaInvalidation/handle(_:)``).
        package var reachesItsOrigin: Bool {
            switch self {
            // The sign-in's own replica may hold a waiter too; the store that finished it does
            // not know it.
            case .apiKeyCreated, .signInFinished: true
            default: false
            }
        }

        /// The metric label of the message kind.
        package var kind: String { String(body.prefix { $0 != ":" }) }

        /// The origin named by `payload`, nil when it names none.
        package static func origin(of payload: String) -> String? {
            split(payload).origin.map(String.init)
        }

        /// Whether `payload` names `origin` as its sender, compared on the bytes: a refresh's
        /// write notifies, so this replica's listener reads its own message once per refresh,
        /// and splitting it into `String`s cost 20k instructions there (issue 30).
        package static func isFrom(_ origin: String, _ payload: String) -> Bool {
            split(payload).origin?.utf8.elementsEqual(origin.utf8) ?? false
        }

        /// The body and the origin of `payload`, as `split(separator: " ", maxSplits: 1)` cut
        /// them: leading spaces skipped, the body up to the next space, the origin all after it
        /// (nil when nothing is).
        private static func split(_ payload: String) -> (body: Substring, origin: Substring?) {
            let text = Substring(payload).drop { $0 == " " }
            guard let space = text.utf8.firstIndex(of: UInt8(ascii: " ")) else { return (text, nil) }
            let origin = text[text.utf8.index(after: space)...]
            return (text[..<space], origin.isEmpty ? nil : origin)
        }

        /// Parses a payload (its origin dropped); nil for one this version does not know (a newer replica's).
        package init?(payload: String) {
            let payload = Self.split(payload).body
            guard let colon = payload.utf8.firstIndex(of: UInt8(ascii: ":")) else { return nil }
            let id = String(payload[payload.utf8.index(after: colon)...])
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
            case "sign_in.finished": self = .signInFinished(id)
            default: return nil
            }
        }
    }

    /// Queues `message` for delivery when the caller's transaction commits.
    package static func send(_ message: ReplicaNotifications.Message, in connection: PostgresConnection) throws {
        _ = try connection.query("SELECT pg_notify($1, $2)", [.text(channel), .text(message.payload)])
    }
}
