import HTTPCommon

extension IdentityPlatformEmulator {
    /// Graph `POST /v1.0/me/sendMail` with `{"message": {..., "toRecipients": [...]},
    /// "saveToSentItems": bool}`: 202 Accepted with no body, the message kept in memory and counted
    /// in the stats as `sent_mail`. A body that is not a JSON object with a `message` object is 400
    /// `RequestBodyRead` (its message says whether the body was empty, not JSON, or without
    /// the `message` object); a message without recipients is 400 `ErrorInvalidRecipients`. The action's
    /// parameter names are matched case-insensitively, as Graph matches them: the Graph SDK for
    /// Python writes `"Message"` and `"SaveToSentItems"`. Source: learn.microsoft.com "user: sendMail".
    func graphSendMail(_ request: HTTPRequest, owner: String, graphError: (Int, String, String, [(String, String)]) -> HTTPResponse) -> HTTPResponse {
        // Each answer says what the body is: "Empty Payload" for a body that was not JSON sent the
        // caller looking for a lost body.
        guard !request.body.isEmpty else {
            return graphError(400, "RequestBodyRead", "Empty Payload. JSON content expected: an object with a 'message' object.", [])
        }
        guard let body = JSONValue.parse(request.body) else {
            return graphError(400, "RequestBodyRead", "The request body is not JSON: an object with a 'message' object is expected.", [])
        }
        guard case .object(let parameters) = body, let message = parameters.first(where: { $0.0.lowercased() == "message" })?.1, case .object = message
        else {
            return graphError(400, "RequestBodyRead", "The request body must be a JSON object with a 'message' object.", [])
        }
        guard let recipients = message["toRecipients"]?.arrayValue, !recipients.isEmpty else {
            return graphError(
                400, "ErrorInvalidRecipients",
                "At least one recipient isn't valid., Recipient '' isn't resolved. All recipients must be resolved before a message can be submitted.", [])
        }
        state.withLock { $0.sentMail.append((owner, message)) }
        return HTTPResponse(status: 202, headers: HTTPHeaders(), body: [])
    }
}
