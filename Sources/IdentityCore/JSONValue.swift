import Foundation

/// A JSON value, for the loosely typed parts of identity-platform payloads (JWT claims,
/// token and error responses, claims requests).
public enum JSONValue: Sendable, Hashable, Codable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        // Strings first: they are most of a token response's and a JWT payload's values, and
        // each kind tried before the right one throws and builds an error (a forced refresh
        // parses two such payloads, issue 30). The kinds are disjoint: the order decides nothing else.
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        case .null: try container.encodeNil()
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The string, when this is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// An integer: an integral number, or a string of ASCII digits (the STS sometimes sends
    /// `"expires_in": "3599"`, behaviour §5).
    public var intValue: Int? {
        switch self {
        case .number(let value):
            guard value.rounded() == value, abs(value) < 9.0e15 else { return nil }
            return Int(value)
        case .string(let value):
            let trimmed = value.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, trimmed.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
            return Int(trimmed)
        default:
            return nil
        }
    }

    /// A JWT's time claim (`exp`, `nbf`, `iat`) in whole unix seconds: RFC 7519 §2's NumericDate
    /// is a JSON number that may be non-integer (`1700000000.5`), read with its fraction dropped
    /// (rounded down); else, as ``intValue`` reads it, a string of digits. Nil for anything else,
    /// or a number past ±9e15.
    public var numericDate: Int? {
        guard case .number(let value) = self else { return intValue }
        guard value.isFinite, abs(value) < 9.0e15 else { return nil }
        return Int(value.rounded(.down))
    }

    /// The Boolean, when this is a Boolean.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The members, when this is an object.
    public var objectValue: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The elements, when this is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// Member lookup; nil unless this is an object holding `key`.
    public subscript(key: String) -> JSONValue? {
        objectValue?[key]
    }

    /// Parses JSON text.
    /// - Parameter bytes: UTF-8 JSON text.
    /// - Returns: the value, or nil when the bytes are not JSON.
    public static func parse(_ bytes: [UInt8]) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
    }

    /// Parses JSON text.
    public static func parse(_ text: String) -> JSONValue? {
        parse(Array(text.utf8))
    }

    /// Compact JSON text with object keys sorted (deterministic: usable in cache keys).
    public var compactSortedText: String {
        var out = ""
        write(into: &out)
        return out
    }

    private func write(into out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let value): out += value ? "true" : "false"
        case .number(let value):
            if value.rounded() == value, abs(value) < 9.0e15 {
                out += String(Int(value))
            } else {
                out += String(value)
            }
        case .string(let value): JSONValue.writeString(value, into: &out)
        case .array(let values):
            out += "["
            for (index, value) in values.enumerated() {
                if index > 0 { out += "," }
                value.write(into: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { out += "," }
                JSONValue.writeString(key, into: &out)
                out += ":"
                members[key]!.write(into: &out)
            }
            out += "}"
        }
    }

    private static func writeString(_ value: String, into out: inout String) {
        out += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    out += String(format: "\\u%04x", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }
}
