import Foundation

/// Lenient base64 / base64url codec (RFC 4648 §4 and §5).
///
/// The identity platform sends `client_info`, JWT segments and `claims` as base64url, usually
/// without `=` padding, sometimes as standard base64 with padding (behaviour §5 "parsed leniently").
enum Base64URL {
    /// Decodes base64url or standard base64, with or without padding.
    /// - Returns: the bytes, or nil when the text is not base64.
    static func decode(_ text: String) -> [UInt8]? {
        var s = text.trimmingCharacters(in: .whitespacesAndNewlines)
        s = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.hasSuffix("=") { s.removeLast() }
        switch s.utf8.count % 4 {
        case 0: break
        case 2: s += "=="
        case 3: s += "="
        default: return nil
        }
        guard let data = Data(base64Encoded: s) else { return nil }
        return [UInt8](data)
    }

    /// Encodes as base64url without padding (RFC 7515 §2).
    static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
