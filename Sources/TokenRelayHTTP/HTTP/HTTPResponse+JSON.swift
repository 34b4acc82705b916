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
        // One list, sized once for `Content-Type`, `extra` and one more field a route may add
        // (`Location`): `extra` copied and its `Content-Type` replaced allocates twice.
        var headers = HTTPHeaders(minimumCapacity: extra.count + 2)
        headers.add("Content-Type", "application/json")
        for (name, value) in extra where !name.caseInsensitiveEquals("Content-Type") { headers.add(name, value) }
        return HTTPResponse(status: status, headers: headers, body: bytes)
    }

    /// A token answer: 200 with the JSON `bytes`, `Cache-Control: no-store` (an answer holding an
    /// access token is never stored by a cache on the way, RFC 6749 §5.1) and `client-request-id`
    /// naming `correlationId`. The fixed fields are one list shared by every token answer: making
    /// it per answer cost about 1k instructions of a cached answer (behaviour §10).
    package static func tokenAnswer(bytes: [UInt8], correlationId: String) -> HTTPResponse {
        HTTPResponse(status: 200, headers: tokenAnswerFields, body: bytes, clientRequestId: correlationId)
    }

    private static let tokenAnswerFields: HTTPHeaders = ["Content-Type": "application/json", "Cache-Control": "no-store"]
}
