import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

/// behaviour §5 UI-required memory: replayed for its TTL, per (account, key), bounded, forgotten on sign-in.
@Suite("UI-required memory")
struct UIRequiredMemoryTests {
    static func problem(_ detail: String = "MFA") -> RelayError {
        var problem = RelayError(.interactionRequired, detail, extensions: ["suberror": .string("basic_action")])
        problem.replayable = true
        return problem
    }

    @Test("An answer is replayed until its TTL ends, and only for the same key")
    func replayedForTTL() {
        let memory = UIRequiredMemory(ttlSeconds: 60)
        let key = UIRequiredMemory.key(realm: "t", scopesKey: "sites.read.all", claims: nil)
        memory.remember(Self.problem(), accountId: "a", key: key, now: 1_000)
        #expect(memory.recall(accountId: "a", key: key, now: 1_059)?.detail == "MFA")
        #expect(memory.recall(accountId: "a", key: UIRequiredMemory.key(realm: "t", scopesKey: "user.read", claims: nil), now: 1_001) == nil)
        #expect(memory.recall(accountId: "b", key: key, now: 1_001) == nil)
        #expect(memory.recall(accountId: "a", key: UIRequiredMemory.key(realm: "t", scopesKey: "sites.read.all", claims: "{}"), now: 1_001) == nil)
        #expect(memory.recall(accountId: "a", key: key, now: 1_060) == nil)
        #expect(memory.count == 0)
    }

    @Test("forget(accountId:) clears one account's answers (a new sign-in)")
    func forget() {
        let memory = UIRequiredMemory(ttlSeconds: 60)
        memory.remember(Self.problem(), accountId: "a", key: "k1", now: 0)
        memory.remember(Self.problem(), accountId: "a", key: "k2", now: 0)
        memory.remember(Self.problem(), accountId: "b", key: "k1", now: 0)
        memory.forget(accountId: "a")
        #expect(memory.recall(accountId: "a", key: "k1", now: 1) == nil)
        #expect(memory.recall(accountId: "b", key: "k1", now: 1) != nil)
        #expect(memory.count == 1)
    }

    @Test("The memory holds at most `capacity` answers: expired ones go first, then the soonest to expire")
    func bounded() {
        let memory = UIRequiredMemory(ttlSeconds: 60, capacity: 3)
        memory.remember(Self.problem("old"), accountId: "a", key: "k0", now: 0)
        memory.remember(Self.problem(), accountId: "a", key: "k1", now: 100)
        memory.remember(Self.problem(), accountId: "b", key: "k2", now: 101)
        memory.remember(Self.problem(), accountId: "c", key: "k3", now: 102)
        #expect(memory.count == 3)
        #expect(memory.recall(accountId: "a", key: "k0", now: 103) == nil)
        memory.remember(Self.problem(), accountId: "d", key: "k4", now: 103)
        #expect(memory.count == 3)
        #expect(memory.recall(accountId: "a", key: "k1", now: 104) == nil)
        #expect(memory.recall(accountId: "d", key: "k4", now: 104) != nil)
        for i in 0..<100 { memory.remember(Self.problem(), accountId: "x\(i)", key: "k", now: 110) }
        #expect(memory.count == 3)
    }

    @Test("A TTL of 0 turns the memory off")
    func disabled() {
        let memory = UIRequiredMemory(ttlSeconds: 0)
        memory.remember(Self.problem(), accountId: "a", key: "k", now: 0)
        #expect(memory.recall(accountId: "a", key: "k", now: 0) == nil)
    }
}
