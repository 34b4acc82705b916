import Synchronization

/// Keys each held until a time of their own, at most `capacity` of them: the one shape under
/// this replica's short-lived memories (behaviour §12 Memories and replicas: UI-required, declined
/// scopes, throttle; and the account, API-key, grant-token and OpenID caches), so that expiry,
/// the bound and the locking are written and tested once.
///
/// **Time** is seconds on one timeline per map, given as `now` to every call that reads or
/// writes, so tests move it without sleeping (STYLE: time is injected). The memories use unix
/// seconds, or `Date.timeIntervalSinceReferenceDate` where a sub-second `Retry-After` matters.
/// An entry is live while `expiresAt > now`: an expired entry is never returned, and it goes when
/// it is read or when room is made. ``count`` includes expired entries that have not gone yet.
///
/// **Making room**, when a key not held arrives and `capacity` keys are held: every expired entry
/// goes first; if none had expired, ``WhenFull`` decides between dropping the entry that expires
/// soonest (ties: the one whose expiry was set longest ago) and not storing the new one. Soonest
/// to expire rather than least recently used: what an entry is worth here is the time it still
/// covers, and where one TTL applies to every entry, soonest to expire is oldest written. Reads do
/// not change the order.
///
/// Thread-safe: one `Mutex` around the whole map; no call suspends or calls out while holding it,
/// except the closures of ``update(_:now:_:)`` and ``removeAll(where:)``, which must be short and
/// must not touch the same map.
///
/// Public, not `package`: release builds specialise a generic type's code into the modules that
/// use it only when its API is public (`-cross-module-optimization` serialises no `package`
/// function); as `package`, every API-key look-up of a cached answer ran the unspecialised map
/// (about 5,500 instructions, behaviour §10).
///
/// - Complexity: a read is O(1); a write is O(log n) amortised, n the keys held (a binary min-heap
///   orders expiry times; a replaced or removed entry leaves a stale heap node, skipped when met
///   and compacted away in O(n log n) once stale nodes outnumber live ones); ``removeAll(where:)``
///   is O(n log n).
public final class ExpiringMap<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// What a full map does with a new key once no expired entry is left to drop.
    public enum WhenFull: Sendable {
        /// Drop the live entry that expires soonest, then store the new one.
        case evictSoonestToExpire
        /// Keep every live entry; the new one is not stored.
        case keepExisting
    }

    /// One value and the time it stops being returned.
    public struct Entry: Sendable {
        public var value: Value
        /// Seconds on the map's timeline; the entry is live while `expiresAt > now`.
        public var expiresAt: Double

        public init(value: Value, expiresAt: Double) {
            self.value = value
            self.expiresAt = expiresAt
        }
    }

    /// Most keys held at once; 0 or less holds nothing.
    public let capacity: Int
    public let whenFull: WhenFull
    // Not private: a private type cannot be specialised into the memories built on this map in
    // other modules (Package.swift).
    let state = Mutex(State())

    /// - Parameters:
    ///   - capacity: most keys held at once (a bound on memory); 0 or less holds nothing.
    ///   - whenFull: what a new key does when the map is full of live entries. Default
    ///     `.evictSoonestToExpire`.
    public init(capacity: Int, whenFull: WhenFull = .evictSoonestToExpire) {
        self.capacity = capacity
        self.whenFull = whenFull
    }

    /// Keys held, expired ones that have not gone yet included.
    public var count: Int { state.withLock { $0.slots.count } }

    /// Every value held, expired ones that have not gone yet included (metrics, tests).
    /// - Complexity: O(n).
    public var values: [Value] { state.withLock { $0.slots.values.map(\.entry.value) } }

    /// The live value of `key`; an expired one goes.
    /// - Parameter now: seconds on the map's timeline.
    public func value(for key: Key, now: Double) -> Value? {
        state.withLock { $0.live(key, now: now)?.value }
    }

    /// Stores `value` for `key` until `expiresAt`, replacing what `key` held.
    /// - Parameters:
    ///   - expiresAt: seconds on the map's timeline; an entry already expired is not stored (and
    ///     what `key` held goes).
    ///   - now: seconds on the map's timeline.
    /// - Returns: false when the value was not stored (expired, or the map is full and keeps its
    ///   entries).
    @discardableResult
    public func set(_ value: Value, for key: Key, expiresAt: Double, now: Double) -> Bool {
        state.withLock { state in
            let held = state.live(key, now: now)?.expiresAt
            return state.store(Entry(value: value, expiresAt: expiresAt), for: key, replacing: held, now: now, capacity: capacity, whenFull: whenFull)
        }
    }

    /// Reads and changes `key`'s entry in one step under the lock: `body` sees the live entry or
    /// nil, and leaves the entry to store, or nil to remove it. Stored as ``set(_:for:expiresAt:now:)``
    /// stores (an expired entry is not; a new key may find no room).
    /// - Parameters:
    ///   - now: seconds on the map's timeline.
    ///   - body: short, and must not use this map (the lock is held).
    /// - Returns: what `body` returns.
    public func update<Result: Sendable>(_ key: Key, now: Double, _ body: (inout Entry?) -> Result) -> Result {
        state.withLock { state in
            var entry = state.live(key, now: now)
            let held = entry?.expiresAt
            let result = body(&entry)
            if let entry {
                _ = state.store(entry, for: key, replacing: held, now: now, capacity: capacity, whenFull: whenFull)
            } else if held != nil {
                state.slots[key] = nil
            }
            return result
        }
    }

    /// Removes `key`'s entry.
    /// - Returns: the value it held, expired or not.
    @discardableResult
    public func removeValue(for key: Key) -> Value? {
        state.withLock { $0.slots.removeValue(forKey: key)?.entry.value }
    }

    /// Removes every entry for which `shouldRemove` is true (e.g. all of one account's).
    /// - Parameter shouldRemove: short, and must not use this map (the lock is held).
    /// - Complexity: O(n log n).
    public func removeAll(where shouldRemove: (Key, Value) -> Bool) {
        state.withLock { state in
            state.slots = state.slots.filter { !shouldRemove($0.key, $0.value.entry.value) }
            state.rebuildHeap()
        }
    }

    /// Removes every entry.
    public func removeAll() {
        state.withLock { $0 = State() }
    }
}

extension ExpiringMap {
    /// An entry and the serial of its heap node.
    struct Slot {
        var entry: Entry
        var serial: UInt64
    }

    /// A heap node: live while its key's slot has the same serial.
    struct Node {
        let expiresAt: Double
        let serial: UInt64
        let key: Key

        /// Sooner expiry first; ties: the older node.
        func precedes(_ other: Node) -> Bool {
            expiresAt < other.expiresAt || (expiresAt == other.expiresAt && serial < other.serial)
        }
    }

    /// The map and a binary min-heap of its expiry times (with stale nodes).
    struct State: Sendable {
        var slots: [Key: Slot] = [:]
        var heap: [Node] = []
        var nextSerial: UInt64 = 0

        /// The live entry of `key`; an expired one goes.
        mutating func live(_ key: Key, now: Double) -> Entry? {
            guard let slot = slots[key] else { return nil }
            guard slot.entry.expiresAt > now else {
                slots[key] = nil
                return nil
            }
            return slot.entry
        }

        /// Stores `entry`; `held` is the expiry of the live entry it replaces, if any.
        /// - Returns: false when it was not stored (expired, or no room).
        mutating func store(_ entry: Entry, for key: Key, replacing held: Double?, now: Double, capacity: Int, whenFull: WhenFull) -> Bool {
            guard entry.expiresAt > now else {
                slots[key] = nil
                return false
            }
            if let held, held == entry.expiresAt, let serial = slots[key]?.serial {
                // Same expiry: the heap node stays valid.
                slots[key] = Slot(entry: entry, serial: serial)
                return true
            }
            if held == nil {
                guard makeRoom(now: now, capacity: capacity, whenFull: whenFull) else { return false }
            }
            nextSerial += 1
            slots[key] = Slot(entry: entry, serial: nextSerial)
            push(Node(expiresAt: entry.expiresAt, serial: nextSerial, key: key))
            if heap.count > 2 * slots.count + 64 { rebuildHeap() }
            return true
        }

        /// Makes room for one more key: drops every expired entry, then (when still full) the one
        /// expiring soonest, or reports no room.
        mutating func makeRoom(now: Double, capacity: Int, whenFull: WhenFull) -> Bool {
            guard capacity > 0 else { return false }
            guard slots.count >= capacity else { return true }
            // Expired entries are at the top of the heap, with stale nodes.
            while let top = heap.first {
                let live = isLive(top)
                guard !live || top.expiresAt <= now else { break }
                popTop()
                if live { slots[top.key] = nil }
            }
            if slots.count < capacity { return true }
            guard whenFull == .evictSoonestToExpire, let top = heap.first else { return false }
            // The loop stopped at a live node: the entry expiring soonest.
            popTop()
            slots[top.key] = nil
            return true
        }

        func isLive(_ node: Node) -> Bool { slots[node.key]?.serial == node.serial }

        /// One node per slot, in order (a sorted array is a valid heap).
        mutating func rebuildHeap() {
            heap = slots.map { Node(expiresAt: $0.value.entry.expiresAt, serial: $0.value.serial, key: $0.key) }
            heap.sort { $0.precedes($1) }
        }

        mutating func push(_ node: Node) {
            heap.append(node)
            var child = heap.count - 1
            while child > 0 {
                let parent = (child - 1) / 2
                guard heap[child].precedes(heap[parent]) else { break }
                heap.swapAt(child, parent)
                child = parent
            }
        }

        mutating func popTop() {
            heap.swapAt(0, heap.count - 1)
            heap.removeLast()
            var parent = 0
            while true {
                let left = 2 * parent + 1
                let right = left + 1
                var first = parent
                if left < heap.count, heap[left].precedes(heap[first]) { first = left }
                if right < heap.count, heap[right].precedes(heap[first]) { first = right }
                guard first != parent else { return }
                heap.swapAt(parent, first)
                parent = first
            }
        }
    }
}
