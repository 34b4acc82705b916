import HTTPCommon

extension IdentityPlatformEmulator {
    /// Graph's `message` resource, enough to relay writes (behaviour §6): `POST /v1.0/me/messages`
    /// creates a draft from the JSON body (201, `Location`, `ETag`), `GET` (and `HEAD`) lists the caller's
    /// drafts (`$top` honoured) or reads one, `PATCH` merges members into one (200), `DELETE`
    /// removes one (204). Drafts live in memory per signed-in user (`oid`). Source:
    /// learn.microsoft.com "Create message", "Update message", "Delete message".
    func graphMessages(
        _ request: HTTPRequest, id: String?, owner: String, graphError: (Int, String, String, [(String, String)]) -> HTTPResponse
    ) -> HTTPResponse {
        func notFound() -> HTTPResponse {
            graphError(404, "ErrorItemNotFound", "The specified object was not found in the store.", [])
        }
        func answer(_ status: Int, _ message: JSONValue, id: String) -> HTTPResponse {
            var response = HTTPResponse(status: status, headers: HTTPHeaders([("Content-Type", "application/json")]), body: message.bytes)
            response.headers.set("ETag", "W/\"\(id.prefix(8))\"")
            if status == 201 { response.headers.set("Location", "\(baseURL)/v1.0/me/messages/\(id)") }
            return response
        }
        func parsedBody() -> [(String, JSONValue)]? {
            guard let body = JSONValue.parse(request.body), case .object(let members) = body else { return nil }
            return members
        }
        switch (request.method == "HEAD" ? "GET" : request.method, id) {
        case ("POST", nil):
            guard let members = parsedBody() else { return graphError(400, "RequestBodyRead", "The request body must be a JSON object.", []) }
            let newId = Self.newGUID()
            let message = JSONValue.object([("id", .string(newId)), ("isDraft", .bool(true))] + members.filter { $0.0 != "id" })
            state.withLock { $0.messages.append((newId, owner, message)) }
            return answer(201, message, id: newId)
        case ("GET", nil):
            let top = request.query.first { $0.name == "$top" }.flatMap { Int($0.value) } ?? 10
            let mine = state.withLock { $0.messages.filter { $0.owner == owner }.map(\.message) }
            return Self.json(200, .object([("value", .array(Array(mine.prefix(max(0, top)))))]))
        case ("GET", let id?):
            guard let message = state.withLock({ $0.messages.first { $0.id == id && $0.owner == owner }?.message }) else { return notFound() }
            return answer(200, message, id: id)
        case ("PATCH", let id?):
            guard let members = parsedBody() else { return graphError(400, "RequestBodyRead", "The request body must be a JSON object.", []) }
            let updated = state.withLock { state -> JSONValue? in
                guard let index = state.messages.firstIndex(where: { $0.id == id && $0.owner == owner }),
                    case .object(var current) = state.messages[index].message
                else { return nil }
                for (name, value) in members where name != "id" {
                    if let at = current.firstIndex(where: { $0.0 == name }) { current[at].1 = value } else { current.append((name, value)) }
                }
                state.messages[index].message = .object(current)
                return .object(current)
            }
            guard let updated else { return notFound() }
            return answer(200, updated, id: id)
        case ("DELETE", let id?):
            let removed = state.withLock { state -> Bool in
                guard let index = state.messages.firstIndex(where: { $0.id == id && $0.owner == owner }) else { return false }
                state.messages.remove(at: index)
                return true
            }
            return removed ? HTTPResponse(status: 204, headers: HTTPHeaders(), body: []) : notFound()
        default:
            return graphError(405, "Request_BadRequest", "Unsupported method.", [])
        }
    }
}
