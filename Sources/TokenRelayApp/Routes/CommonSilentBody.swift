import Foundation

/// The usual body of a silent-token request, `{"account_id": "...", "scopes": [...]}` with an
/// optional `correlation_id`, read by Foundation's `JSONSerialization` for the server-thread path.
/// Any other member or type is left to the async path, which also words every error.
///
/// `JSONSerialization` rather than `JSONDecoder`: measured with `bench/run` (same machine, same
/// run of the benchmark), the generic decoder on libmicrohttpd's threads cost about a third of the
/// cached path's throughput.
struct CommonSilentBody {
    let accountId: String
    let scopes: [String]
    let correlationId: String?

    static let members: Set<String> = ["account_id", "scopes", "correlation_id"]

    /// The body (sent as plain `application/json`) when it has the usual shape.
    static func decode(body: [UInt8]) -> CommonSilentBody? {
        guard !body.isEmpty,
            let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any],
            object.keys.allSatisfy(members.contains),
            let accountId = object["account_id"] as? String, !accountId.isEmpty, !accountId.unicodeScalars.contains("\u{0}"),
            let scopes = object["scopes"] as? [String]
        else { return nil }
        var correlationId: String?
        if let value = object["correlation_id"] {
            // An unusable one is worded by the async path (400 naming `correlation_id`).
            guard let text = value as? String, text.isEmpty || JSONBody.isUsableCorrelationId(text) else { return nil }
            correlationId = text.isEmpty ? nil : text
        }
        return CommonSilentBody(accountId: accountId, scopes: scopes, correlationId: correlationId)
    }
}
