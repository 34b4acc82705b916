import IdentityCore

/// Bytes the heap really spends on the values a memory cache holds, for the costs that bound
/// ``ByteBoundedLRU`` (issue 13: costs that counted only UTF-8 and array elements let resident
/// memory reach about 1.3 times `TOKENRELAY_MEMORY_CACHE_MB`, measured by `MemoryAccountingTests`).
///
/// The layouts are those of Swift 6's native storage on 64-bit Linux, allocated by glibc malloc;
/// a value shared with another (copy on write) is counted where the caller counts it.
package enum HeapCost {
    /// A malloc chunk holding `bytes`: an 8-byte size word, rounded up to 16, at least 32 (glibc).
    package static func chunk(_ bytes: Int) -> Int { max(32, (bytes + 8 + 15) & ~15) }

    /// A string's buffer: none up to 15 UTF-8 bytes (held inline); else a 32-byte header and a
    /// tail of the bytes, a NUL and, from 64 bytes on, an 8-byte breadcrumbs pointer, the tail
    /// rounded up to 16 (Swift 6's `_allocateStringStorage`). Measured at every length from 14 to
    /// 90 bytes and at JWT sizes by `MemoryAccountingTests`. A string built by appending may have
    /// spare capacity beyond its count, which this does not see.
    package static func string(_ text: String) -> Int {
        let count = text.utf8.count
        guard count > 15 else { return 0 }
        return chunk(32 + ((count + 1 + (count >= 64 ? 8 : 0) + 15) & ~15))
    }

    package static func string(_ text: String?) -> Int { text.map(string) ?? 0 }

    /// A class instance: a 16-byte header (metadata and reference counts) and its stored fields,
    /// `fieldBytes` (laid out as a tuple of the same fields is).
    package static func object(fieldBytes: Int) -> Int { chunk(16 + fieldBytes) }

    /// Strings' buffers and the array that holds them.
    package static func strings(_ items: [String]) -> Int { items.reduce(array(items)) { $0 + string($1) } }

    /// An array's buffer: a 32-byte header and `capacity` elements (not their own buffers).
    package static func array<Element>(_ items: [Element]) -> Int {
        items.capacity == 0 ? 0 : chunk(32 + items.capacity * MemoryLayout<Element>.stride)
    }

    /// A set's or dictionary's storage for `count` entries of `stride` bytes (key and value):
    /// a header of about 64 bytes, a bitmap word per 64 buckets and the buckets, a power of two
    /// kept at most three quarters full.
    package static func hashTable(count: Int, stride: Int) -> Int {
        guard count > 0 else { return 0 }
        var buckets = 1
        while buckets * 3 < count * 4 { buckets *= 2 }
        return chunk(64 + 8 * ((buckets + 63) / 64) + buckets * stride)
    }

    /// A set of strings: its table and the strings' buffers.
    package static func set(_ items: Set<String>) -> Int {
        items.reduce(hashTable(count: items.count, stride: MemoryLayout<String>.stride)) { $0 + string($1) }
    }

    /// A parsed JSON tree: its arrays' and objects' storage and the strings in it.
    package static func json(_ value: JSONValue) -> Int {
        switch value {
        case .string(let text): return string(text)
        case .number, .bool, .null: return 0
        case .array(let items): return items.reduce(array(items)) { $0 + json($1) }
        case .object(let members):
            return members.reduce(hashTable(count: members.count, stride: MemoryLayout<String>.stride + MemoryLayout<JSONValue>.stride)) {
                $0 + string($1.key) + json($1.value)
            }
        }
    }
}
