import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

/// ExpiringMap: expiry, the bound and its eviction order, read-modify-write, removal by
/// predicate, and the lock, with time passed in (no sleeping).
@Suite("Expiring map")
struct ExpiringMapTests {
    @Test("An entry is returned while expiresAt > now; once expired it is not, and it goes")
    func expiry() {
        let map = ExpiringMap<String, Int>(capacity: 10)
        #expect(map.set(1, for: "a", expiresAt: 100, now: 0))
        #expect(map.value(for: "a", now: 99.9) == 1)
        #expect(map.count == 1)
        #expect(map.value(for: "a", now: 100) == nil)
        #expect(map.count == 0, "an expired entry stayed after it was read")
        #expect(map.value(for: "missing", now: 0) == nil)
    }

    @Test("An entry already expired is not stored, and replaces what the key held")
    func expiredOnWrite() {
        let map = ExpiringMap<String, Int>(capacity: 10)
        map.set(1, for: "a", expiresAt: 100, now: 0)
        #expect(!map.set(2, for: "a", expiresAt: 50, now: 50))
        #expect(map.value(for: "a", now: 60) == nil)
        #expect(map.count == 0)
    }

    @Test("Full: every expired entry goes first, then the one expiring soonest")
    func evictionOrder() {
        let map = ExpiringMap<String, Int>(capacity: 3)
        map.set(1, for: "x", expiresAt: 10, now: 0)
        map.set(2, for: "y", expiresAt: 20, now: 0)
        map.set(3, for: "z", expiresAt: 100, now: 0)
        map.set(4, for: "w", expiresAt: 200, now: 30)  // x and y have both expired
        #expect(map.count == 2)
        map.set(5, for: "v", expiresAt: 150, now: 30)
        #expect(map.count == 3)
        map.set(6, for: "u", expiresAt: 300, now: 30)  // none expired: z (100) expires soonest
        #expect(map.value(for: "z", now: 30) == nil)
        #expect(map.value(for: "v", now: 30) == 5)
        #expect(map.value(for: "w", now: 30) == 4)
        #expect(map.value(for: "u", now: 30) == 6)
    }

    @Test("Soonest to expire, not least recently used: reads do not change the order; ties go to the oldest write")
    func notLRUAndTies() {
        let map = ExpiringMap<String, Int>(capacity: 2)
        map.set(1, for: "a", expiresAt: 100, now: 0)
        map.set(2, for: "b", expiresAt: 100, now: 0)
        for _ in 0..<5 { _ = map.value(for: "a", now: 1) }
        map.set(3, for: "c", expiresAt: 100, now: 1)
        #expect(map.value(for: "a", now: 1) == nil, "the older of two equal expiries stayed")
        #expect(map.value(for: "b", now: 1) == 2)
        // Rewritten with the same expiry, an entry keeps its place (b is still the older)...
        map.set(20, for: "b", expiresAt: 100, now: 1)
        map.set(4, for: "d", expiresAt: 200, now: 1)
        #expect(map.value(for: "b", now: 1) == nil)
        #expect(map.value(for: "c", now: 1) == 3)
        // ...and with a later one it moves back.
        map.set(30, for: "c", expiresAt: 500, now: 1)
        map.set(5, for: "e", expiresAt: 300, now: 1)
        #expect(map.value(for: "d", now: 1) == nil)
        #expect(map.value(for: "c", now: 1) == 30)
    }

    @Test("Replacing a key held does not make room; a full map that keeps its entries refuses new keys until one expires")
    func replaceAndKeepExisting() {
        let map = ExpiringMap<String, Int>(capacity: 2, whenFull: .keepExisting)
        map.set(1, for: "a", expiresAt: 100, now: 0)
        map.set(2, for: "b", expiresAt: 50, now: 0)
        #expect(map.set(10, for: "a", expiresAt: 100, now: 0))
        #expect(map.value(for: "b", now: 0) == 2)
        #expect(!map.set(3, for: "c", expiresAt: 100, now: 10))
        #expect(map.value(for: "c", now: 10) == nil)
        #expect(map.count == 2)
        #expect(map.set(3, for: "c", expiresAt: 100, now: 50))  // b has expired
        #expect(map.value(for: "a", now: 50) == 10)
        #expect(map.value(for: "c", now: 50) == 3)
    }

    @Test("A capacity of 0 holds nothing")
    func zeroCapacity() {
        let map = ExpiringMap<String, Int>(capacity: 0)
        #expect(!map.set(1, for: "a", expiresAt: 100, now: 0))
        #expect(map.count == 0)
    }

    @Test("update sees the live entry or nil, and stores, keeps or removes in one step")
    func update() {
        let map = ExpiringMap<String, Int>(capacity: 10)
        // Never shortened: keep the later of two expiries.
        func extend(_ key: String, to expiresAt: Double, now: Double) {
            map.update(key, now: now) { entry in
                if let entry, entry.expiresAt >= expiresAt { return }
                entry = .init(value: Int(expiresAt), expiresAt: expiresAt)
            }
        }
        extend("k", to: 100, now: 0)
        extend("k", to: 50, now: 0)
        #expect(map.value(for: "k", now: 60) == 100)
        map.set(1, for: "old", expiresAt: 10, now: 0)
        let seen = map.update("old", now: 10) { $0?.value }
        #expect(seen == nil, "update saw an expired entry")
        let removed = map.update("k", now: 60) { entry -> Int? in
            defer { entry = nil }
            return entry?.value
        }
        #expect(removed == 100)
        #expect(map.count == 0)
    }

    @Test("removeAll(where:) removes one group of keys; the eviction order of the rest holds")
    func removeByPrefix() {
        let map = ExpiringMap<String, Int>(capacity: 4)
        map.set(1, for: "acc1|a", expiresAt: 10, now: 0)
        map.set(2, for: "acc1|b", expiresAt: 20, now: 0)
        map.set(3, for: "acc2|a", expiresAt: 30, now: 0)
        map.set(4, for: "acc2|b", expiresAt: 40, now: 0)
        map.removeAll { key, _ in key.hasPrefix("acc1|") }
        #expect(map.count == 2)
        #expect(map.value(for: "acc1|b", now: 0) == nil)
        map.set(5, for: "acc3|a", expiresAt: 50, now: 0)
        map.set(6, for: "acc3|b", expiresAt: 60, now: 0)
        map.set(7, for: "acc3|c", expiresAt: 70, now: 0)  // full: acc2|a (30) goes
        #expect(map.value(for: "acc2|a", now: 0) == nil)
        #expect(map.value(for: "acc2|b", now: 0) == 4)
        map.removeAll()
        #expect(map.count == 0)
        #expect(map.values.isEmpty)
    }

    /// What the map must do, written the slow and obvious way.
    struct Model {
        var entries: [Int: (value: Int, expiresAt: Double, serial: Int)] = [:]
        var serial = 0
        let capacity: Int
        let evicts: Bool

        mutating func value(_ key: Int, now: Double) -> Int? {
            guard let entry = entries[key] else { return nil }
            guard entry.expiresAt > now else {
                entries[key] = nil
                return nil
            }
            return entry.value
        }

        mutating func set(_ value: Int, _ key: Int, expiresAt: Double, now: Double) {
            let held = self.value(key, now: now) != nil
            guard expiresAt > now else {
                entries[key] = nil
                return
            }
            if held, let old = entries[key], old.expiresAt == expiresAt {
                entries[key] = (value, expiresAt, old.serial)
                return
            }
            if !held && entries.count >= capacity {
                entries = entries.filter { $0.value.expiresAt > now }
                if entries.count >= capacity {
                    guard evicts else { return }
                    let soonest = entries.min { ($0.value.expiresAt, $0.value.serial) < ($1.value.expiresAt, $1.value.serial) }!
                    entries[soonest.key] = nil
                }
            }
            serial += 1
            entries[key] = (value, expiresAt, serial)
        }
    }

    @Test("Random writes, reads and removals agree with a naive model (heap compaction included)", arguments: [true, false])
    func agreesWithModel(evicts: Bool) {
        let map = ExpiringMap<Int, Int>(capacity: 8, whenFull: evicts ? .evictSoonestToExpire : .keepExisting)
        var model = Model(capacity: 8, evicts: evicts)
        var generator = SplitMix(seed: evicts ? 1 : 2)
        var now = 0.0
        for step in 0..<20_000 {
            // Phases of fewer keys than the capacity: no room is made, so rewrites leave stale
            // heap nodes until the heap is compacted; phases of more keys then evict.
            let key = Int(generator.next() % ((step / 1_000) % 2 == 0 ? 6 : 20))
            switch generator.next() % 10 {
            case 0: now += Double(generator.next() % 5)
            case 1:
                map.removeValue(for: key)
                model.entries[key] = nil
            case 2, 3, 4:
                #expect(map.value(for: key, now: now) == model.value(key, now: now), "step \(step)")
            default:
                // Few distinct expiries, so ties and same-expiry replacements happen often.
                let expiresAt = now + Double(generator.next() % 12)
                map.set(step, for: key, expiresAt: expiresAt, now: now)
                model.set(step, key, expiresAt: expiresAt, now: now)
            }
            #expect(map.count == model.entries.count, "step \(step)")
            #expect(map.count <= 8)
        }
        for key in 0..<20 { #expect(map.value(for: key, now: now) == model.value(key, now: now)) }
    }

    @Test("Concurrent writers and readers: the bound holds and read-modify-writes are not lost")
    func concurrency() async {
        let map = ExpiringMap<Int, Int>(capacity: 100)
        let counter = ExpiringMap<String, Int>(capacity: 1)
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for index in 0..<2_000 {
                        let key = (worker * 7919 + index) % 300
                        map.set(key * 2, for: key, expiresAt: Double(1_000 + index % 50), now: 0)
                        if let value = map.value(for: key, now: 0) { #expect(value == key * 2) }
                        if index % 10 == 0 { map.removeValue(for: key) }
                        counter.update("n", now: 0) { entry in
                            entry = .init(value: (entry?.value ?? 0) + 1, expiresAt: 10_000)
                        }
                    }
                }
            }
        }
        #expect(map.count <= 100)
        #expect(counter.value(for: "n", now: 0) == 16_000)
    }
}

/// A small seeded generator (SplitMix64), so the model test is the same on every run.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
