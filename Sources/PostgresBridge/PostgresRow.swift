/// One row of a ``PostgresResult``: values in PostgreSQL's text format, read by column name or
/// index.
///
/// Accessors return nil for SQL NULL, for an unknown column and for a value that does not parse as
/// the asked type.
public struct PostgresRow: Sendable {
    /// Column names and their index, shared by every row of one result.
    final class Columns: Sendable {
        let names: [String]
        /// The index by name of a wide result; nil for a narrow one, whose names are searched in
        /// order: hashing every name of each result into a dictionary cost more than the few
        /// look-ups of a one-row result (a forced refresh's two statements, behaviour §10).
        let indexByName: [String: Int]?

        /// Results up to this many columns are searched in order.
        static let searchedInOrder = 16

        init(names: [String]) {
            self.names = names
            guard names.count > Self.searchedInOrder else {
                indexByName = nil
                return
            }
            var index: [String: Int] = [:]
            // The first of duplicated names wins, as in most drivers.
            for (position, name) in names.enumerated() where index[name] == nil {
                index[name] = position
            }
            indexByName = index
        }

        /// The index of the first column named `name`.
        func index(of name: String) -> Int? {
            if let indexByName { return indexByName[name] }
            return names.firstIndex(of: name)
        }
    }

    let columns: Columns
    /// Text-format values; nil is SQL NULL.
    let values: [String?]

    init(columns: Columns, values: [String?]) {
        self.columns = columns
        self.values = values
    }

    /// The column names of this row, in order.
    public var columnNames: [String] { columns.names }

    // MARK: By name

    /// The value as text, or nil for NULL or an unknown column.
    public func string(_ column: String) -> String? { index(of: column).flatMap(string(at:)) }
    /// The value as a 64-bit integer (`int2`/`int4`/`int8` or digit text), or nil.
    public func int(_ column: String) -> Int64? { index(of: column).flatMap(int(at:)) }
    /// The value as a boolean (`t`/`f`, as `bool` prints), or nil.
    public func bool(_ column: String) -> Bool? { index(of: column).flatMap(bool(at:)) }
    /// A `bytea` value (text format `\x` hex, decoded), or nil.
    public func bytes(_ column: String) -> [UInt8]? { index(of: column).flatMap(bytes(at:)) }
    /// True when the value is NULL or the column does not exist.
    public func isNull(_ column: String) -> Bool { index(of: column).map(isNull(at:)) ?? true }

    // MARK: By index

    /// The value at `index` as text, or nil for NULL or an index out of range.
    public func string(at index: Int) -> String? {
        values.indices.contains(index) ? values[index] : nil
    }

    /// The value at `index` as a 64-bit integer, or nil.
    public func int(at index: Int) -> Int64? { string(at: index).flatMap { Int64($0) } }

    /// The value at `index` as a boolean (`t`/`f`; `true`/`false` also accepted), or nil.
    public func bool(at index: Int) -> Bool? {
        switch string(at: index) {
        case "t", "true": true
        case "f", "false": false
        default: nil
        }
    }

    /// The `bytea` value at `index`, decoded from the text format's `\x` hex, or nil.
    public func bytes(at index: Int) -> [UInt8]? { string(at: index).flatMap(Self.decodeHexBytea) }

    /// True when the value at `index` is NULL or the index is out of range.
    public func isNull(at index: Int) -> Bool { string(at: index) == nil }

    private func index(of column: String) -> Int? { columns.index(of: column) }

    /// Decodes `bytea_output = hex` text (`\x` then two hex digits per byte).
    /// Source: PostgreSQL docs, "Binary Data Types", §8.4.1 "bytea Hex Format".
    static func decodeHexBytea(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"),
            utf8.count % 2 == 0
        else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity((utf8.count - 2) / 2)
        var position = 2
        while position < utf8.count {
            guard let high = hexValue(utf8[position]), let low = hexValue(utf8[position + 1]) else {
                return nil
            }
            bytes.append(high << 4 | low)
            position += 2
        }
        return bytes
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
