import Foundation
import HTTPCommon
import IdentityCore

/// Encodes response bodies. Keys are sorted so answers are stable byte for byte.
enum JSONWriter {
    static func encode(_ value: JSONValue) -> [UInt8] {
        (try? encode(encodable: value)) ?? Array("{}".utf8)
    }

    static func encode<T: Encodable>(encodable value: T) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(value))
    }
}

extension HTTPResponse {
    /// A JSON answer with `Content-Type: application/json`.
    static func json(_ status: Int, _ value: JSONValue, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        var headers = headers
        headers.set("Content-Type", "application/json")
        return HTTPResponse(status: status, headers: headers, body: JSONWriter.encode(value))
    }
}
