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
        let parts = accessToken.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = Base64URL.decode(String(decoding: parts[1], as: UTF8.self)),
            let uti = JSONValue.parse(payload)?.objectValue?["uti"]?.stringValue
        else { return nil }
        return isIdentifier(uti) ? uti : nil
    }

    /// Whether `text` could be a `uti`: 1 to ``maxLength`` base64url characters (RFC 4648 §5).
    public static func isIdentifier(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= maxLength && text.utf8.allSatisfy { $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
    }
}
