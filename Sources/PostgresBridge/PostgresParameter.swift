/// One bound parameter (`$1`, `$2`, …) of ``PostgresConnection/query(_:_:)``.
///
/// How each case travels (PostgreSQL docs, "libpq Command Execution Functions", `PQexecParams`):
/// - `text`: text format, type left for the server to infer (so it binds to `text`, `uuid`,
///   `jsonb`, `timestamptz`, … columns alike).
/// - `bytes`: binary format typed `bytea`, so arbitrary bytes (including 0x00) need no escaping.
/// - `int`: text format typed `int8`.
/// - `bool`: text format typed `bool` (`t`/`f`).
/// - `null`: SQL NULL, type inferred.
public enum PostgresParameter: Sendable, Equatable {
    case text(String)
    case bytes([UInt8])
    case int(Int64)
    case bool(Bool)
    case null
}

extension PostgresParameter {
    /// PostgreSQL type OIDs from `pg_type` (stable, part of the catalog's fixed OIDs).
    enum TypeOID {
        static let unspecified: UInt32 = 0
        static let bool: UInt32 = 16
        static let bytea: UInt32 = 17
        static let int8: UInt32 = 20
    }

    /// The OID sent in `paramTypes`; 0 lets the server infer it from context.
    var typeOID: UInt32 {
        switch self {
        case .text, .null: TypeOID.unspecified
        case .bytes: TypeOID.bytea
        case .int: TypeOID.int8
        case .bool: TypeOID.bool
        }
    }

    /// 1 (binary) for bytes, 0 (text) otherwise.
    var format: Int32 {
        if case .bytes = self { 1 } else { 0 }
    }
}
