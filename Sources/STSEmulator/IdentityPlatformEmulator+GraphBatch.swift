import Foundation
import HTTPCommon

extension IdentityPlatformEmulator {
    /// The most sub-requests one `$batch` may hold (learn.microsoft.com "JSON batching").
    static let batchLimit = 20

    /// Graph `POST /v1.0/$batch` (JSON batching): `{"requests": [{"id", "method", "url", "headers"?,
    /// "body"?, "dependsOn"?}]}` → 200 `{"responses": [{"id", "status", "headers", "body"?}]}`.
    /// Each sub-request's `url` is relative to `/v1.0` (`/me`, `me/messages?$top=2`) and is
    /// answered by the emulator's own Graph routes with the batch's `Authorization`, so it is
    /// counted, logged and faulted like a request of its own. A JSON response body is inlined, any
    /// other is base64. A sub-request whose `dependsOn` names one that did not succeed is 424; a
    /// `body` without a `Content-Type` header, or a URL the emulator has no Graph route for (an
    /// absolute URL too, as Graph refuses those), is that sub-request's 400. A payload that is not that shape, more than 20 requests or a
    /// repeated `id` (case-insensitive) fails the whole batch with 400 `BadRequest`. Source:
    /// learn.microsoft.com "Combine multiple HTTP requests using JSON batching".
    func graphBatch(_ request: HTTPRequest, graphError: (Int, String, String, [(String, String)]) -> HTTPResponse) -> Outcome {
        func invalid(_ message: String) -> Outcome { Outcome(response: graphError(400, "BadRequest", message, [])) }
        guard let payload = JSONValue.parse(request.body), let requests = payload["requests"]?.arrayValue, !requests.isEmpty else {
            return invalid("Invalid batch payload format: a JSON object with a non-empty 'requests' array is expected.")
        }
        guard requests.count <= Self.batchLimit else {
            return invalid("The number of batch requests exceeds the limit of \(Self.batchLimit).")
        }
        var seen = Set<String>()
        for item in requests {
            guard let id = item["id"]?.stringValue, item["method"]?.stringValue != nil, item["url"]?.stringValue != nil else {
                return invalid("Invalid batch payload format: every request needs 'id', 'method' and 'url'.")
            }
            guard seen.insert(id.lowercased()).inserted else { return invalid("Batch request ids must be unique; '\(id)' is repeated.") }
        }

        var statuses: [String: Int] = [:]
        var responses: [JSONValue] = []
        var delay = 0
        for item in requests {
            let id = item["id"]!.stringValue!
            let response: HTTPResponse
            let dependsOn = (item["dependsOn"]?.arrayValue ?? []).compactMap(\.stringValue)
            if let failed = dependsOn.first(where: { !(200..<300).contains(statuses[$0.lowercased()] ?? 0) }) {
                response = graphError(424, "FailedDependency", "The request '\(id)' depends on '\(failed)', which did not succeed.", [])
            } else {
                let outcome = subrequest(item, of: request, graphError: graphError)
                delay = max(delay, outcome.delayMilliseconds)
                response = outcome.response
            }
            statuses[id.lowercased()] = response.status
            responses.append(Self.batchResponse(id: id, response))
        }
        return Outcome(response: Self.json(200, ["responses": .array(responses)]), delayMilliseconds: delay)
    }

    /// One sub-request answered by the Graph routes, with the batch's `Authorization`.
    private func subrequest(_ item: JSONValue, of batch: HTTPRequest, graphError: (Int, String, String, [(String, String)]) -> HTTPResponse)
        -> Outcome
    {
        let method = item["method"]!.stringValue!.uppercased()
        var url = item["url"]!.stringValue!
        while url.hasPrefix("/") { url.removeFirst() }
        let parts = url.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = "/v1.0/" + (String(parts[0]).removingPercentEncoding ?? String(parts[0]))
        let query = parts.count > 1 ? FormEncoding.parse(String(parts[1])) : []

        var headers = HTTPHeaders()
        if case .object(let members) = item["headers"] ?? .null {
            for (name, value) in members { if let value = value.stringValue { headers.add(name, value) } }
        }
        for name in ["Authorization", "client-request-id"] { if let value = batch.headers[name] { headers.set(name, value) } }
        var body: [UInt8] = []
        if let value = item["body"], value != .null {
            guard headers["Content-Type"] != nil else {
                return Outcome(response: graphError(400, "BadRequest", "A request with a body needs a Content-Type header.", []))
            }
            if case .string(let text) = value, let decoded = Data(base64Encoded: text) { body = Array(decoded) } else { body = value.bytes }
        }
        let inner = HTTPRequest(method: method, path: path, query: query, headers: headers, body: body)
        guard case .graph(let resource) = Route(inner), resource != .batch else {
            // Graph's answer to a URL it has no route for, an absolute one included (msgraph-sdk-python
            // issue 1015: the SDK's BatchRequestItem keeps the absolute URL; Graph refuses it).
            return Outcome(response: graphError(400, "BadRequest", "Resource not found for the segment '\(parts[0].split(separator: "/").first ?? "")'.", []))
        }
        return graph(inner, resource)
    }

    /// A sub-response: status, headers as an object, and the body inlined when it is JSON, else base64.
    private static func batchResponse(id: String, _ response: HTTPResponse) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("id", .string(id)), ("status", .int(response.status)),
            ("headers", .object(response.headers.map { ($0.name, JSONValue.string($0.value)) })),
        ]
        if !response.body.isEmpty {
            let isJSON = response.headers["Content-Type"]?.lowercased().hasPrefix("application/json") ?? false
            members.append(("body", isJSON ? JSONValue.parse(response.body) ?? .null : .string(Data(response.body).base64EncodedString())))
        }
        return .object(members)
    }
}
