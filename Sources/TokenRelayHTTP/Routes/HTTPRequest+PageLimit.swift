import HTTPCommon
import TokenRelayBase
import TokenRelayUpstream

extension HTTPRequest {
    /// The `limit` query parameter of a list route (`GET /v1/accounts`, `GET /v1/events`): items
    /// per page, 1 to 200, default 50.
    /// - Throws: `RelayError` 400 `invalid_request` naming `limit` (out of range, or given twice).
    package func pageLimit() throws(RelayError) -> Int {
        // Digits only, as `wait` is read: `Int("+5")` is 5, and `+5` or `05` is no limit we hand out.
        let limit = try onlyQueryValue("limit").map { text in Int(text).flatMap { String($0) == text ? $0 : nil } ?? -1 } ?? 50
        guard (1...200).contains(limit) else {
            throw RelayError.invalidRequest(field: "limit", "'limit' must be an integer from 1 to 200.")
        }
        return limit
    }
}
