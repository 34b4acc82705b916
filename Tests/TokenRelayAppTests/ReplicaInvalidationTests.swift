import Foundation
import Synchronization
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

/// The invalidation messages and hooks of cross-replica invalidation (behaviour §12), without a database.
@Suite("Replica invalidation")
struct ReplicaInvalidationTests {
    @Test(
        "every message survives its payload, which names this replica as its origin",
        arguments: [
            ReplicaInvalidation.Message.accountDeleted("acc_a-b_c"), .accountSignedIn("acc_1"), .accountChanged("acc_2"),
            .accessTokensReplaced("acc_3"), .apiKeyRevoked("abcdefgh12"), .tenantSuspended("11111111-1111-1111-1111-111111111111"),
            .tenantResumed("11111111-1111-1111-1111-111111111111"),
        ])
    func roundTrip(_ message: ReplicaInvalidation.Message) {
        #expect(ReplicaInvalidation.Message(payload: message.payload) == message)
        #expect(ReplicaInvalidation.Message.origin(of: message.payload) == ReplicaInvalidation.origin)
        #expect(ReplicaInvalidation.Message.isFrom(ReplicaInvalidation.origin, message.payload))
        #expect(!ReplicaInvalidation.Message.isFrom("other", message.payload))
        #expect(message.payload.utf8.count < 8000)
    }

    @Test("the SQL-built payloads (prefix || id || ' ' || origin) parse; unknown kinds are ignored")
    func sqlPayloads() {
        let deleted = ReplicaInvalidation.Message.accountDeletedPrefix + "acc_x " + "other"
        #expect(ReplicaInvalidation.Message(payload: deleted) == .accountDeleted("acc_x"))
        #expect(ReplicaInvalidation.Message.origin(of: deleted) == "other")
        #expect(ReplicaInvalidation.Message.isFrom("other", deleted))
        #expect(!ReplicaInvalidation.Message.isFrom(ReplicaInvalidation.origin, deleted))
        #expect(!ReplicaInvalidation.Message.isFrom("othe", deleted) && !ReplicaInvalidation.Message.isFrom("other2", deleted))
        // Cut as `split(separator: " ", maxSplits: 1)` cut them before: spaces before the body skipped,
        // the origin all after the first space after it, none when nothing follows.
        #expect(ReplicaInvalidation.Message(payload: "  refresh.released:acc_y o") == .refreshReleased("acc_y"))
        #expect(ReplicaInvalidation.Message(payload: "refresh.released:acc_y ") == .refreshReleased("acc_y"))
        #expect(ReplicaInvalidation.Message.origin(of: "refresh.released:acc_y ") == nil)
        #expect(ReplicaInvalidation.Message.origin(of: "refresh.released:acc_y  o") == " o")
        #expect(ReplicaInvalidation.Message.origin(of: "refresh.released:acc_y") == nil)
        #expect(ReplicaInvalidation.Message(payload: "account.renamed:acc_x o") == nil)
        #expect(ReplicaInvalidation.Message(payload: "account.deleted: o") == nil)
        #expect(ReplicaInvalidation.Message(payload: "nonsense") == nil)
    }

    @Test("each message runs the hooks of its kind only")
    func hooks() {
        let invalidation = ReplicaInvalidation(metrics: Metrics(), logger: Logger(level: .error, logPII: false))
        let calls = Mutex<[String]>([])
        invalidation.onAccountForgotten { id in calls.withLock { $0.append("account:" + id) } }
        invalidation.onAccessTokensReplaced { id in calls.withLock { $0.append("tokens:" + id) } }
        invalidation.onAPIKeyRevoked { id in calls.withLock { $0.append("key:" + id) } }
        invalidation.apply(.accountDeleted("a"))
        invalidation.apply(.accountSignedIn("b"))
        invalidation.apply(.accessTokensReplaced("c"))
        invalidation.apply(.apiKeyRevoked("d"))
        #expect(calls.withLock { $0 } == ["account:a", "account:b", "tokens:c", "key:d"])
    }
}
