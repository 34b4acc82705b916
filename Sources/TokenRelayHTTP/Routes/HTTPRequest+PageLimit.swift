import HTTPCommon
import TokenRelayBase
import TokenRelayUpstream

extension HTTPRequest {
    /// The `limit` query parameter of a list route (`GET /v1/accounts`, `GET /v1/events`): items
    /// per page, 1 to 200, default 50.
    /// - Throws: `RelayError` 400 `invalid_request` naming `limit` (not an integer, out of range,
    ///   or given twice).
    package func pageLimit() throws(RelayError) -> Int {
        guard let text = try onlyQueryValue("limit") else { return 50 }
        return try IntegerText.parse(text, field: "limit", in: 1...200)
    }
}
