/// An ordered list of HTTP header fields whose names compare case-insensitively (RFC 9110 §5.1).
///
/// Shared by the server and client bridges so that neither leaks a C type and both look headers
/// up the same way (`retry-after` and `Retry-After` are one field).
///
/// The fields live in one byte buffer, each as its name's and its value's length (4 bytes each,
/// little-endian), the name, a NUL, the value and a NUL: the server copies a request's head into
/// it without a `String` per name and value, a copy of the list is one reference count, and a
/// name or value becomes a `String` only when someone asks for it (a `String` per name and value
/// and a list entry per field, retained and released on every copy, cost the cached answer about
/// 2k instructions, behaviour §10; bench/README.md). The NULs let the server bridge hand names
/// and values to libmicrohttpd as they lie.
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByDictionaryLiteral, Equatable {
    public typealias Element = (name: String, value: String)

    private var bytes: [UInt8]
    /// How many fields `bytes` holds.
    public private(set) var count: Int
    /// Bit `n` set when a field's name is `n` bytes long (bit 63: 63 or more): a look-up of a
    /// name no field has the length of, which is most look-ups of a request's optional fields
    /// (`Request-Timeout`, `client-request-id`, `X-Correlation-ID`, `traceparent`), is one test
    /// instead of a walk over every field (behaviour §10).
    private var nameLengths: UInt64 = 0

    /// Bytes of a field's entry besides its name and value: the two lengths and the two NULs.
    private static let entryOverhead = 10

    public init() {
        bytes = []
        count = 0
        nameLengths = 0
    }

    /// An empty list with room for `minimumCapacity` fields of common size before it grows.
    public init(minimumCapacity: Int) {
        self.init()
        bytes.reserveCapacity(minimumCapacity * 48)
    }

    /// Makes room for `fields` more fields of common size: a list shared with another (a copy of
    /// one made once) gets its own buffer here, once, instead of on the next add and again as it grows.
    public mutating func reserveCapacity(forMoreFields fields: Int) {
        bytes.reserveCapacity(bytes.count + fields * 48)
    }

    public init(_ fields: [(String, String)]) {
        self.init()
        for (name, value) in fields { add(name, value) }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The first value of the field `name`, or nil.
    public subscript(name: String) -> String? {
        firstValue(name)?.value
    }

    /// Where each field lies in `bytes`, in order.
    private struct Entry {
        var nameStart: Int
        var nameCount: Int
        var valueCount: Int
        var valueStart: Int { nameStart + nameCount + 1 }
        /// Where the next entry begins.
        var end: Int { valueStart + valueCount + 1 }

        /// The entry at `offset` of `buffer` (which holds a whole entry there).
        @inline(__always)
        init(at offset: Int, in buffer: UnsafeRawBufferPointer) {
            nameStart = offset + 8
            nameCount = Int(UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
            valueCount = Int(UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)))
        }

        /// Whether the entry's name in `buffer` is `name` (its UTF-8) in any ASCII case.
        @inline(__always)
        func isNamed(_ name: UnsafeBufferPointer<UInt8>, in buffer: UnsafeRawBufferPointer) -> Bool {
            guard nameCount == name.count else { return false }
            // Most look-ups spell the name as it was sent: eight bytes at a time first (a byte at a
            // time, folding case, was most of a look-up's cost; behaviour §10).
            if Self.sameBytes(buffer.baseAddress! + nameStart, UnsafeRawPointer(name.baseAddress!), nameCount) { return true }
            for index in 0..<nameCount {
                let x = buffer[nameStart + index], y = name[index]
                guard x != y else { continue }
                let lx = (x >= 65 && x <= 90) ? x + 32 : x
                let ly = (y >= 65 && y <= 90) ? y + 32 : y
                if lx != ly { return false }
            }
            return true
        }

        /// Whether `count` bytes at `a` and at `b` are the same.
        @inline(__always)
        static func sameBytes(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ count: Int) -> Bool {
            var offset = 0
            while offset + 8 <= count {
                guard a.loadUnaligned(fromByteOffset: offset, as: UInt64.self) == b.loadUnaligned(fromByteOffset: offset, as: UInt64.self) else {
                    return false
                }
                offset += 8
            }
            while offset < count {
                guard a.load(fromByteOffset: offset, as: UInt8.self) == b.load(fromByteOffset: offset, as: UInt8.self) else { return false }
                offset += 1
            }
            return true
        }
    }

    /// Calls `body` with every entry, in order, and the buffer it lies in, until it returns false.
    /// The buffer and the entries' bytes are read through a pointer valid only during the call:
    /// indexing the array per byte, or making a `String` per field, cost more than the rest of
    /// a look-up (behaviour §10).
    @discardableResult @inline(__always)
    private func forEachEntry(_ body: (Entry, UnsafeRawBufferPointer) -> Bool) -> Bool {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let entry = Entry(at: offset, in: buffer)
                guard body(entry, buffer) else { return false }
                offset = entry.end
            }
            return true
        }
    }

    /// The bit of ``nameLengths`` for a name of `length` bytes.
    @inline(__always)
    private static func lengthBit(_ length: Int) -> UInt64 { 1 << UInt64(Swift.min(length, 63)) }

    /// The entries named `name`, in order, until `body` returns false.
    @inline(__always)
    private func forEachEntry(named name: String, _ body: (Entry, UnsafeRawBufferPointer) -> Bool) {
        guard nameLengths & Self.lengthBit(name.utf8.count) != 0 else { return }
        var name = name
        _ = name.withUTF8 { name in
            forEachEntry { entry, buffer in
                entry.isNamed(name, in: buffer) ? body(entry, buffer) : true
            }
        }
    }

    /// A name or value as a `String`: the ones most requests carry as literals (no allocation or
    /// UTF-8 validation; `application/json` is one byte too long for a string without storage).
    private static func string(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ count: Int) -> String {
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[start..<start + count])
        func exactly(_ literal: StaticString) -> Bool {
            bytes.elementsEqual(UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
        }
        switch count {
        case 16 where exactly("application/json"): return "application/json"
        case 31 where exactly("application/json; charset=utf-8"): return "application/json; charset=utf-8"
        case 10 where exactly("keep-alive"): return "keep-alive"
        default: return String(decoding: bytes, as: UTF8.self)
        }
    }

    /// The first value of the field `name`, and whether a later field has that name too.
    public func firstValue(_ name: String) -> (value: String, repeated: Bool)? {
        var found: String?
        var repeated = false
        forEachEntry(named: name) { entry, buffer in
            guard found == nil else {
                repeated = true
                return false
            }
            found = Self.string(buffer, entry.valueStart, entry.valueCount)
            return true
        }
        return found.map { ($0, repeated) }
    }

    /// Calls `body` with the first value of the field `name` as it lies in the list (borrowed, no
    /// `String` made) and whether a later field has that name too; nil when there is none. For a
    /// value only compared or cut (an `Authorization` credential; a `String` of it was made per
    /// request, behaviour §10).
    public func withFirstValue<Result>(_ name: String, _ body: (_ value: Span<UInt8>, _ repeated: Bool) -> Result) -> Result? {
        var found: Range<Int>?
        var repeated = false
        forEachEntry(named: name) { entry, _ in
            guard found == nil else {
                repeated = true
                return false
            }
            found = entry.valueStart..<entry.valueStart + entry.valueCount
            return true
        }
        guard let found else { return nil }
        return body(bytes.span.extracting(found), repeated)
    }

    /// Whether a field's name is `count` bytes long: settles cheaply that none of the names of
    /// that length is present.
    public func containsName(ofLength count: Int) -> Bool {
        guard nameLengths & Self.lengthBit(count) != 0 else { return false }
        return count < 63 || !forEachEntry { entry, _ in entry.nameCount != count }
    }

    /// Every value of the field `name`, in order.
    public func values(for name: String) -> [String] {
        var values: [String] = []
        forEachEntry(named: name) { entry, buffer in
            values.append(Self.string(buffer, entry.valueStart, entry.valueCount))
            return true
        }
        return values
    }

    /// Bytes of the fields as a header section sends them: each name and value plus `": "` and CRLF.
    public var fieldBytes: Int { bytes.count - count * (Self.entryOverhead - 4) }

    /// Appends a field, keeping any existing field of the same name.
    public mutating func add(_ name: String, _ value: String) {
        var name = name, value = value
        name.withUTF8 { name in
            value.withUTF8 { value in add(name: UnsafeRawBufferPointer(name), value: UnsafeRawBufferPointer(value)) }
        }
    }

    /// Appends a field from its name's and value's bytes, as they lie in a request's head (the
    /// server bridge's reading, without a `String` of either).
    package mutating func add(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        let entryCount = name.count + value.count + Self.entryOverhead
        // Grown geometrically by the array, written with two copies: appending byte by byte cost
        // a capacity and uniqueness check per byte.
        bytes.append(addingCapacity: entryCount) { output in
            output.withUnsafeMutableBufferPointer { buffer, initialized in
                let entry = UnsafeMutableRawBufferPointer(buffer)
                entry.storeBytes(of: UInt32(truncatingIfNeeded: name.count).littleEndian, toByteOffset: 0, as: UInt32.self)
                entry.storeBytes(of: UInt32(truncatingIfNeeded: value.count).littleEndian, toByteOffset: 4, as: UInt32.self)
                if !name.isEmpty { UnsafeMutableRawBufferPointer(rebasing: entry[8...]).copyMemory(from: name) }
                entry[8 + name.count] = 0
                if !value.isEmpty { UnsafeMutableRawBufferPointer(rebasing: entry[(9 + name.count)...]).copyMemory(from: value) }
                entry[entryCount - 1] = 0
                initialized = entryCount
            }
        }
        count += 1
        nameLengths |= Self.lengthBit(name.count)
    }

    /// Appends the fields `write` gives, written in place into room for `room` bytes of entries
    /// reserved once (the server bridge's reading of a request head: one reservation per head, where
    /// appending field by field checked capacity and uniqueness and ran a closure per field;
    /// behaviour §10). An entry takes ``FieldWriter/entryBytes(name:value:)`` bytes.
    /// - Returns: false, with nothing appended, when the fields did not fit in `room`.
    package mutating func appendFields(room: Int, _ write: (inout FieldWriter) -> Void) -> Bool {
        var fields = 0
        var lengths: UInt64 = 0
        var fitted = true
        bytes.append(addingCapacity: room) { output in
            output.withUnsafeMutableBufferPointer { buffer, initialized in
                var writer = FieldWriter(room: UnsafeMutableRawBufferPointer(buffer))
                write(&writer)
                fitted = !writer.overflowed
                fields = fitted ? writer.fields : 0
                lengths = writer.nameLengths
                initialized = fitted ? writer.written : 0
            }
        }
        count += fields
        if fitted { nameLengths |= lengths }
        return fitted
    }

    /// Writes entries into the room ``appendFields(room:_:)`` reserved, valid only during its call.
    package struct FieldWriter {
        private let room: UnsafeMutableRawBufferPointer
        fileprivate private(set) var written = 0
        fileprivate private(set) var fields = 0
        fileprivate private(set) var nameLengths: UInt64 = 0
        /// A field did not fit: nothing more is written, and nothing is appended.
        package private(set) var overflowed = false

        fileprivate init(room: UnsafeMutableRawBufferPointer) {
            self.room = room
        }

        /// The bytes a field of these name and value takes in the list.
        package static func entryBytes(name: Int, value: Int) -> Int { name + value + HTTPHeaders.entryOverhead }

        /// Writes one field (as ``HTTPHeaders/add(name:value:)`` would append it).
        package mutating func add(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
            let entryCount = Self.entryBytes(name: name.count, value: value.count)
            guard !overflowed, entryCount <= room.count - written else {
                overflowed = true
                return
            }
            let entry = room.baseAddress! + written
            entry.storeBytes(of: UInt32(truncatingIfNeeded: name.count).littleEndian, toByteOffset: 0, as: UInt32.self)
            entry.storeBytes(of: UInt32(truncatingIfNeeded: value.count).littleEndian, toByteOffset: 4, as: UInt32.self)
            if !name.isEmpty { (entry + 8).copyMemory(from: name.baseAddress!, byteCount: name.count) }
            entry.storeBytes(of: 0, toByteOffset: 8 + name.count, as: UInt8.self)
            if !value.isEmpty { (entry + 9 + name.count).copyMemory(from: value.baseAddress!, byteCount: value.count) }
            entry.storeBytes(of: 0, toByteOffset: entryCount - 1, as: UInt8.self)
            written += entryCount
            fields += 1
            nameLengths |= HTTPHeaders.lengthBit(name.count)
        }
    }

    /// Replaces every field named `name` by one with `value`.
    public mutating func set(_ name: String, _ value: String) {
        remove(name)
        add(name, value)
    }

    public mutating func remove(_ name: String) {
        guard contains(name) else { return }
        var kept = HTTPHeaders()
        var name = name
        _ = name.withUTF8 { name in
            forEachEntry { entry, buffer in
                if !entry.isNamed(name, in: buffer) {
                    kept.add(
                        name: UnsafeRawBufferPointer(rebasing: buffer[entry.nameStart..<entry.nameStart + entry.nameCount]),
                        value: UnsafeRawBufferPointer(rebasing: buffer[entry.valueStart..<entry.valueStart + entry.valueCount]))
                }
                return true
            }
        }
        self = kept
    }

    /// Removes every field; with `keepingCapacity`, the buffer stays allocated for the next fields
    /// (the server bridge reuses a connection's buffer for its next request).
    public mutating func removeAll(keepingCapacity: Bool = false) {
        bytes.removeAll(keepingCapacity: keepingCapacity)
        count = 0
        nameLengths = 0
    }

    public func contains(_ name: String) -> Bool {
        var found = false
        forEachEntry(named: name) { _, _ in
            found = true
            return false
        }
        return found
    }

    /// Calls `body` with each field's name and value as NUL-terminated C strings, in order, valid
    /// only during the call, until it returns false (what the server bridge hands libmicrohttpd).
    /// - Returns: false when `body` stopped the walk.
    package func withEachCField(_ body: (UnsafePointer<CChar>, UnsafePointer<CChar>) -> Bool) -> Bool {
        forEachEntry { entry, buffer in
            let text = buffer.baseAddress!.assumingMemoryBound(to: CChar.self)
            return body(text + entry.nameStart, text + entry.valueStart)
        }
    }

    /// Calls `body` with each field's name and value bytes (without their NULs), in order, valid
    /// only during the call, until it returns false (what the client bridge writes into a request's
    /// header lines, without a `String` of either).
    /// - Returns: false when `body` stopped the walk.
    package func withEachField(_ body: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Bool) -> Bool {
        forEachEntry { entry, buffer in
            body(
                UnsafeRawBufferPointer(rebasing: buffer[entry.nameStart..<entry.nameStart + entry.nameCount]),
                UnsafeRawBufferPointer(rebasing: buffer[entry.valueStart..<entry.valueStart + entry.valueCount]))
        }
    }

    public struct Iterator: IteratorProtocol {
        fileprivate let headers: HTTPHeaders
        fileprivate var offset = 0

        public mutating func next() -> (name: String, value: String)? {
            guard offset < headers.bytes.count else { return nil }
            return headers.bytes.withUnsafeBytes { buffer in
                let entry = Entry(at: offset, in: buffer)
                offset = entry.end
                return (HTTPHeaders.string(buffer, entry.nameStart, entry.nameCount), HTTPHeaders.string(buffer, entry.valueStart, entry.valueCount))
            }
        }
    }

    public func makeIterator() -> Iterator {
        Iterator(headers: self)
    }

    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.count == rhs.count && zip(lhs, rhs).allSatisfy { $0.name.caseInsensitiveEquals($1.name) && $0.value == $1.value }
    }
}
extension String {
    /// ASCII case-insensitive comparison, as header names and scopes need.
    @inlinable
    public func caseInsensitiveEquals(_ other: String) -> Bool {
        // Indexing two `Span`s: zipping the UTF-8 views was a measurable share of a cached
        // silent request (behaviour §10), which looks up several headers.
        // Most names compared differ in length, which a native string knows without a span.
        guard utf8.count == other.utf8.count else { return false }
        let a = utf8.span, b = other.utf8.span
        for index in 0..<a.count where a[index] != b[index] {
            let x = a[index], y = b[index]
            let lx = (x >= 65 && x <= 90) ? x + 32 : x
            let ly = (y >= 65 && y <= 90) ? y + 32 : y
            if lx != ly { return false }
        }
        return true
    }
}
