import Foundation

/// The token identifier (`uti` claim) of an access token: the id the identity platform's sign-in
/// logs show for the request that issued it ("Access token claims reference", `uti`; Entra
/// sign-in logs, "Unique token identifier"). Read without checking the signature: the token came
/// straight from the token endpoint over TLS, and the value only labels an audit record.
public enum AccessTokenIdentifier {
    /// The most characters a `uti` is kept with (the platform's are 22).
    public static let maxLength = 128

    /// The `uti` claim of `accessToken`, or nil when the token is not a JWS with a `uti` of
    /// base64url characters (personal Microsoft accounts' tokens are often opaque; an app may ask
    /// for an encrypted token). Never throws and never returns token text other than the claim.
    public static func uti(of accessToken: String) -> String? {
        // Three segments: two dots, found in the token's bytes (splitting the token's UTF-8
        // view cost 70k instructions of a forced refresh, behaviour §10).
        let bytes = Array(accessToken.utf8)
        guard let first = bytes.firstIndex(of: UInt8(ascii: ".")),
            let second = bytes[(first + 1)...].firstIndex(of: UInt8(ascii: ".")),
            !bytes[(second + 1)...].contains(UInt8(ascii: ".")),
            let payload = Base64URL.decode(bytes[(first + 1)..<second]),
            let uti = try? JSONDecoder().decode(UTIClaim.self, from: Data(payload)).uti
        else { return nil }
        return isIdentifier(uti) ? uti : nil
    }

    /// The one claim read of the payload: the payload is read whole (refused when it is not a
    /// JSON object), but only `uti` is converted. Decoding every claim into `JSONValue` was a
    /// quarter of a forced refresh's instructions (behaviour §10). Asked for as text: a
    /// `uti` of any other kind fails the decoding, and is no `uti` either way.
    struct UTIClaim: Decodable {
        let uti: String?
    }

    /// Whether `text` could be a `uti`: 1 to ``maxLength`` base64url characters (RFC 4648 §5).
    public static func isIdentifier(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= maxLength && text.utf8.allSatisfy { $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
    }
}
