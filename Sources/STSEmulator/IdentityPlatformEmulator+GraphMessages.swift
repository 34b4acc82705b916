import HTTPCommon

extension IdentityPlatformEmulator {
    /// Graph's `message` resource, enough to relay writes (behaviour §6): `POST /v1.0/me/messages`
    /// creates a draft from the JSON body (201, `Location`, `ETag`), `GET` (and `HEAD`) lists the caller's
    /// drafts or reads one, `PATCH` merges members into one (200), `DELETE` removes one (204).
    /// Drafts live in memory per signed-in user (`oid`). The list is paged server-side as Graph
    /// pages it: `$top` (default 10) and `$skip` (default 0) pick the page, and while drafts remain
    /// the page carries an absolute `@odata.nextLink` under the emulator's Graph base URL
    /// (`{base}/v1.0/me/messages?%24top=2&%24skip=2`, `$` percent-encoded as Graph writes it); a
    /// `$top` or `$skip` that is not a non-negative integer is 400. Source: learn.microsoft.com
    /// "Create message", "Update message", "Delete message", "Paging Microsoft Graph data".
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
            return page(request, owner: owner, graphError: graphError)
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

    /// One page of the caller's drafts: `$top` from `$skip`, with `@odata.nextLink` while more remain.
    private func page(
        _ request: HTTPRequest, owner: String, graphError: (Int, String, String, [(String, String)]) -> HTTPResponse
    ) -> HTTPResponse {
        // An absent option takes Graph's default; one that is not a number reads as -1 and is refused.
        let top = request.queryValue("$top").map { Int($0) ?? -1 } ?? 10
        let skip = request.queryValue("$skip").map { Int($0) ?? -1 } ?? 0
        guard top >= 0, skip >= 0 else {
            return graphError(400, "BadRequest", "Invalid value for a $top or $skip query option: a non-negative integer is expected.", [])
        }
        let mine = state.withLock { $0.messages.filter { $0.owner == owner }.map(\.message) }
        let pageItems = Array(mine.dropFirst(skip).prefix(top))
        var members: [(String, JSONValue)] = [
            ("@odata.context", .string("\(baseURL)/v1.0/$metadata#users('\(owner)')/messages")), ("value", .array(pageItems)),
        ]
        if top > 0, skip + top < mine.count {
            let topPart = request.queryValue("$top") == nil ? "" : "%24top=\(top)&"
            members.append(("@odata.nextLink", .string("\(baseURL)/v1.0/me/messages?\(topPart)%24skip=\(skip + top)")))
        }
        return HTTPResponse(
            status: 200, headers: HTTPHeaders([("Content-Type", "application/json;odata.metadata=minimal;odata.streaming=true;charset=utf-8")]),
            body: JSONValue.object(members).bytes)
    }
}
