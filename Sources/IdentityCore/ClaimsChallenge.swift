import Foundation

/// Claims challenges from resources (behaviour §1 "Claims challenge"; Microsoft identity platform
/// "Claims challenges, claims requests and client capabilities"; case 18).
public enum ClaimsChallenge {
    /// The claims request of a `Bearer` challenge with `error="insufficient_claims"`.
    /// - Parameter header: a `WWW-Authenticate` value.
    /// - Returns: the decoded JSON text (the header carries base64), or nil when the header
    ///   holds no such challenge or the value does not decode.
    public static func claims(fromWWWAuthenticate header: String) -> String? {
        for challenge in AuthenticationChallenge.parse(header) where challenge.scheme.lowercased() == "bearer" {
            guard challenge.parameters["error"]?.lowercased() == "insufficient_claims",
                let value = challenge.parameters["claims"], !value.isEmpty
            else { continue }
            if let text = ClaimsRequest.decodedText(value), JSONValue.parse(text)?.objectValue != nil { return text }
        }
        return nil
    }
}
