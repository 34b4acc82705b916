import HTTPCommon
import TokenRelayBase

extension HTTPRequest {
    /// The `limit` query parameter of a list route (`GET /v1/accounts`, `GET /v1/events`): items
    /// per page, 1 to 200, default 50.
    /// - Throws: `RelayError` 400 `invalid_request` naming `limit` (out of range, or given twice).
    package func pageLimit() throws(RelayError) -> Int {
        let limit = try onlyQueryValue("limit").map { Int($0) ?? -1 } ?? 50
        guard (1...200).contains(limit) else {
            throw RelayError.invalidRequest(field: "limit", "'limit' must be an integer from 1 to 200.")
        }
        return limit
    }
}
