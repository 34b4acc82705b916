/// An ordered list of HTTP header fields whose names compare case-insensitively (RFC 9110 §5.1).
///
/// Shared by the server and client bridges so that neither leaks a C type and both look headers
/// up the same way (`retry-after` and `Retry-After` are one field).
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByDictionaryLiteral, Equatable {
    public typealias Element = (name: String, value: String)

    private var fields: [(name: String, value: String)]

    public init() { fields = [] }

    /// An empty list with room for `minimumCapacity` fields before it grows.
    public init(minimumCapacity: Int) {
        fields = []
        fields.reserveCapacity(minimumCapacity)
    }

    public init(_ fields: [(String, String)]) {
        self.fields = fields.map { (name: $0.0, value: $0.1) }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The first value of the field `name`, or nil.
    public subscript(name: String) -> String? {
        firstValue(name)?.value
    }

    /// The first value of the field `name`, and whether a later field has that name too.
    ///
    /// By index: iterating copied every field's name and value (a retain and a release of each
    /// on the cached answer's path, behaviour §10), to read one.
    public func firstValue(_ name: String) -> (value: String, repeated: Bool)? {
        var found: Int?
        for index in fields.indices where fields[index].name.caseInsensitiveEquals(name) {
            if let found { return (fields[found].value, true) }
            found = index
        }
        return found.map { (fields[$0].value, false) }
    }

    /// Whether a field's name is `count` bytes long: settles cheaply that none of the names of
    /// that length is present.
    public func containsName(ofLength count: Int) -> Bool {
        fields.indices.contains { fields[$0].name.utf8.count == count }
    }

    /// Every value of the field `name`, in order.
    public func values(for name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
    }

    /// Appends a field, keeping any existing field of the same name.
    public mutating func add(_ name: String, _ value: String) {
        fields.append((name: name, value: value))
    }

    /// Replaces every field named `name` by one with `value`.
    public mutating func set(_ name: String, _ value: String) {
        remove(name)
        fields.append((name: name, value: value))
    }

    public mutating func remove(_ name: String) {
        fields.removeAll { $0.name.caseInsensitiveEquals(name) }
    }

    public func contains(_ name: String) -> Bool { self[name] != nil }

    public var count: Int { fields.count }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        fields.makeIterator()
    }

    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.count == rhs.fields.count
            && zip(lhs.fields, rhs.fields).allSatisfy { $0.name.caseInsensitiveEquals($1.name) && $0.value == $1.value }
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
