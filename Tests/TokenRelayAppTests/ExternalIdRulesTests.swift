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

/// The rules of an external id (behaviour §3.7) and what a replica may believe of one from memory.
@Suite("External id rules and memory")
struct ExternalIdRulesTests {
    @Test(
        "Accepted: 1-128 printable ASCII but '/', no space at either end, not acc_, not a name the account path cannot reach",
        arguments: [
            "a", "imports", "Import", "...", "crm:42 alice", "user@contoso.example", "~!#$%^&*()[]{}|\\\"'<>,.?=+;", "acc", "acc-1", "xacc_",
            String(repeating: "z", count: 128),
        ])
    func accepted(value: String) throws {
        #expect(try ExternalId.validated(value, owner: "team-a") == ExternalId(owner: "team-a", value: value))
    }

    @Test(
        "Refused with 400 naming external_id",
        arguments: [
            "", " a", "a ", " ", String(repeating: "z", count: 129), "tab\there", "nul\u{0}", "del\u{7F}", "caf\u{e9}", "a/b", "acc_", "acc_x",
            "Acc_x", "ACC_0123456789abcdefghijkl", "import", ".", "..",
        ])
    func refused(value: String) {
        do {
            _ = try ExternalId.validated(value, owner: "team-a")
            Issue.record("\(value.debugDescription) was accepted")
        } catch {
            #expect(error.code == .invalidRequest)
            #expect(error.extensions["field"] == .string("external_id"))
        }
    }

    @Test("Only values starting with acc_ (any case) have the shape of an account id")
    func accountIdShape() {
        #expect(ExternalId.looksLikeAccountId("acc_" + RandomToken.make(bytes: 16)))
        #expect(ExternalId.looksLikeAccountId("ACC_x"))
        #expect(!ExternalId.looksLikeAccountId("acc"))
        #expect(!ExternalId.looksLikeAccountId("acc-x"))
        #expect(!ExternalId.looksLikeAccountId("aacc_"))
        #expect(!ExternalId.looksLikeAccountId("crm-42"))
    }

    static func record(_ id: String, externalIds: [String: String]) -> AccountRecord {
        AccountRecord(
            accountId: id, clientId: "c", environment: "login.microsoftonline.com", homeAccountId: "u.t", realm: "t", localAccountId: "u",
            username: "u@contoso.example", name: nil, authority: "https://login.microsoftonline.com/t", authorityType: .aad, state: .active,
            idTokenClaims: "{}", createdAt: "2026-11-29T00:00:00Z", lastUsedAt: nil, externalIds: externalIds)
    }

    @Test("A remembered external id is believed only while its account is held and still carries it, per owner, for the TTL")
    func memory() {
        let clock = TestClock(unixTime: 1_000)
        let cache = AccountCache(ttl: 30, clock: clock.clock)
        let crm = ExternalId(owner: "team-a", value: "crm-42")

        let alice = Self.record("acc_alice", externalIds: ["team-a": "crm-42"])
        cache.store(alice, readMark: cache.readMark)
        cache.remember(crm, of: alice)
        #expect(cache.account(externalId: crm)?.accountId == "acc_alice")
        #expect(cache.account(externalId: ExternalId(owner: "team-b", value: "crm-42")) == nil)

        // Not remembered for an account that does not carry it.
        let bob = Self.record("acc_bob", externalIds: [:])
        cache.store(bob, readMark: cache.readMark)
        cache.remember(ExternalId(owner: "team-a", value: "other"), of: bob)
        #expect(cache.account(externalId: ExternalId(owner: "team-a", value: "other")) == nil)

        // The account forgotten (deleted, signed in again, changed): the entry is not believed,
        // even once the account is read again without that external id.
        cache.remove(id: "acc_alice")
        #expect(cache.account(externalId: crm) == nil)
        cache.store(Self.record("acc_alice", externalIds: ["team-a": "crm-43"]), readMark: cache.readMark)
        #expect(cache.account(externalId: crm) == nil)

        // Expires with the TTL, and with removeAll.
        let carol = Self.record("acc_carol", externalIds: ["team-a": "crm-42"])
        cache.store(carol, readMark: cache.readMark)
        cache.remember(crm, of: carol)
        #expect(cache.account(externalId: crm)?.accountId == "acc_carol")
        clock.advance(by: 30)
        #expect(cache.account(externalId: crm) == nil)
        clock.advance(by: 10)
        cache.store(carol, readMark: cache.readMark)
        cache.remember(crm, of: carol)
        cache.removeAll()
        cache.store(carol, readMark: cache.readMark)
        #expect(cache.account(externalId: crm) == nil)
    }
}
