import HTTPCommon
import IdentityCore
import TokenRelayBase

extension HTTPResponse {
    /// A JSON answer with `Content-Type: application/json`.
    package static func json(_ status: Int, _ value: JSONValue, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        json(status, bytes: JSONWriter.encode(value), headers: headers)
    }

    /// A JSON answer whose body is already encoded.
    package static func json(_ status: Int, bytes: [UInt8], headers extra: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        // One list, sized once, with room for the `client-request-id` the epilogue adds (a UUID:
        // 63 bytes of entry) and a token answer's `Cache-Control`: copying `extra` and replacing
        // its `Content-Type` allocated twice on every answer, and a third field grew the list.
        var headers = HTTPHeaders(minimumCapacity: extra.count + 3)
        headers.add("Content-Type", "application/json")
        for (name, value) in extra where !name.caseInsensitiveEquals("Content-Type") { headers.add(name, value) }
        return HTTPResponse(status: status, headers: headers, body: bytes)
    }
}
