import Synchronization

/// Values by key, holding at most `capacityBytes` of them by their own cost, least recently
/// used out first: the bound under this replica's token and account caches (behaviour §10.4,
/// `TOKENRELAY_MEMORY_CACHE_MB`), so that memory follows bytes rather than entry counts.
///
/// A value's **cost** is given by the caller when storing it: the heap bytes it holds (``HeapCost``:
/// strings, prebuilt answers) plus an overhead per entry for its slot and index bucket
/// (``entryOverheadBytes``). A value costing more than the whole capacity is not
/// stored.
///
/// **Recency**: ``value(for:)`` and ``set(_:for:cost:)`` make the key the most recently used;
/// ``peek(_:)`` does not. Making room drops the least recently used keys until the new value fits.
///
/// Thread-safe: one `Mutex` around the whole structure; nothing suspends or calls out while
/// holding it except the closure of ``update(_:_:)``, which must be short and must not use the
/// same cache.
///
/// - Complexity: every operation O(1) (a dictionary of slot indices and a doubly linked list
///   threaded through an array of slots, with a free list), except ``removeAll(where:)``, O(n).
package final class ByteBoundedLRU<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// Bytes counted per entry on top of the value's own cost: its slot (key, value's fields, list
    /// links) and its index bucket, with the slack of buffers that grow by doubling (a quarter
    /// for the slots, the index kept at most three quarters full and growing: half).
    package static var entryOverheadBytes: Int {
        MemoryLayout<Slot>.stride * 5 / 4 + (MemoryLayout<Key>.stride + MemoryLayout<Int>.stride) * 3 / 2
    }

    /// Most bytes held at once; 0 or less holds nothing.
    package let capacityBytes: Int
    private let state: Mutex<State>

    /// - Parameter capacityBytes: most bytes held, values' costs plus overhead.
    package init(capacityBytes: Int) {
        self.capacityBytes = capacityBytes
        state = Mutex(State())
    }

    package var usage: MemoryUsage { state.withLock { $0.usage } }

    /// The value of `key`, made the most recently used.
    package func value(for key: Key) -> Value? {
        state.withLock { state in
            guard let index = state.index[key] else { return nil }
            state.moveToFront(index)
            return state.slots[index].value
        }
    }

    /// The value of `key`, its recency unchanged.
    package func peek(_ key: Key) -> Value? {
        state.withLock { state in state.index[key].flatMap { state.slots[$0].value } }
    }

    /// Stores `value` for `key` at `cost` bytes (plus ``entryOverheadBytes``), as the most recently
    /// used, dropping the least recently used keys until it fits.
    /// - Returns: false when the value alone exceeds the capacity (then nothing is held for `key`).
    @discardableResult
    package func set(_ value: Value, for key: Key, cost: Int) -> Bool {
        state.withLock { $0.store(value, for: key, cost: cost, capacity: capacityBytes) }
    }

    /// Reads and changes `key`'s value in one step under the lock: `body` sees the value or nil
    /// and leaves the value to store with its cost, or nil to remove it.
    /// - Parameter body: short, and must not use this cache (the lock is held).
    package func update<Result: Sendable>(_ key: Key, _ body: (inout (value: Value, cost: Int)?) -> Result) -> Result {
        state.withLock { state in
            var current = state.index[key].map { (value: state.slots[$0].value!, cost: state.slots[$0].cost - Self.entryOverheadBytes) }
            let result = body(&current)
            if let current {
                _ = state.store(current.value, for: key, cost: current.cost, capacity: capacityBytes)
            } else {
                state.remove(key)
            }
            return result
        }
    }

    /// Changes `key`'s value in place under the lock, its cost unchanged, and makes it the most
    /// recently used: for a change that adds no bytes (a time, a flag), without the copy and
    /// re-store of ``update(_:_:)`` (a served cache hit's touch, issue 13).
    /// - Parameter body: short, and must not use this cache (the lock is held).
    /// - Returns: what `body` returned, or nil when `key` is not held (`body` is not called).
    package func modify<Result: Sendable>(_ key: Key, _ body: (inout Value) -> Result) -> Result? {
        state.withLock { state in
            guard let index = state.index[key] else { return nil }
            state.moveToFront(index)
            return body(&state.slots[index].value!)
        }
    }

    /// Removes `key`'s value.
    /// - Returns: the value it held.
    @discardableResult
    package func removeValue(for key: Key) -> Value? {
        state.withLock { $0.remove(key) }
    }

    /// Removes every value for which `shouldRemove` is true.
    /// - Parameter shouldRemove: short, and must not use this cache (the lock is held).
    package func removeAll(where shouldRemove: (Key, Value) -> Bool) {
        state.withLock { state in
            let doomed = state.index.compactMap { key, index in shouldRemove(key, state.slots[index].value!) ? key : nil }
            for key in doomed { state.remove(key) }
        }
    }

    /// Calls `body` with every key and value, in no particular order (metrics, tests).
    /// - Parameter body: short, and must not use this cache (the lock is held).
    package func forEach(_ body: (Key, Value) -> Void) {
        state.withLock { state in
            for (key, index) in state.index { body(key, state.slots[index].value!) }
        }
    }

    /// Removes every value (the eviction count stays).
    package func removeAll() {
        state.withLock { state in
            let evictions = state.usage.evictions
            state = State()
            state.usage.evictions = evictions
        }
    }
}

extension ByteBoundedLRU {
    /// One entry, linked to its neighbours by slot index (-1: none).
    private struct Slot {
        var key: Key?
        var value: Value?
        var cost = 0
        var newer = -1
        var older = -1
    }

    private struct State: Sendable {
        var index: [Key: Int] = [:]
        var slots: [Slot] = []
        var free: [Int] = []
        /// Most and least recently used slots (-1 when empty).
        var newest = -1
        var oldest = -1
        var usage = MemoryUsage()

        mutating func store(_ value: Value, for key: Key, cost: Int, capacity: Int) -> Bool {
            let total = max(cost, 0) + ByteBoundedLRU.entryOverheadBytes
            remove(key)
            guard total <= capacity else { return false }
            while usage.bytes + total > capacity, oldest >= 0, let victim = slots[oldest].key {
                remove(victim)
                usage.evictions += 1
            }
            let slot = Slot(key: key, value: value, cost: total)
            let position: Int
            if let reused = free.popLast() {
                slots[reused] = slot
                position = reused
            } else {
                slots.append(slot)
                position = slots.count - 1
            }
            index[key] = position
            linkAtFront(position)
            usage.bytes += total
            usage.entries += 1
            return true
        }

        @discardableResult
        mutating func remove(_ key: Key) -> Value? {
            guard let position = index.removeValue(forKey: key) else { return nil }
            unlink(position)
            let value = slots[position].value
            usage.bytes -= slots[position].cost
            usage.entries -= 1
            slots[position] = Slot()
            free.append(position)
            return value
        }

        mutating func moveToFront(_ position: Int) {
            guard newest != position else { return }
            unlink(position)
            linkAtFront(position)
        }

        private mutating func linkAtFront(_ position: Int) {
            slots[position].older = newest
            slots[position].newer = -1
            if newest >= 0 { slots[newest].newer = position }
            newest = position
            if oldest < 0 { oldest = position }
        }

        private mutating func unlink(_ position: Int) {
            let (newer, older) = (slots[position].newer, slots[position].older)
            if newer >= 0 { slots[newer].older = older } else { newest = older }
            if older >= 0 { slots[older].newer = newer } else { oldest = newer }
            slots[position].newer = -1
            slots[position].older = -1
        }
    }
}
