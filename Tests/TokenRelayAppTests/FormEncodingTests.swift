import Foundation
import Testing
import TokenRelayAcquisition

/// The token request's body (`application/x-www-form-urlencoded`, WHATWG URL §5) as the STS client
/// writes it: unreserved bytes kept, space as `+`, every other UTF-8 byte `%XX` upper-case.
@Suite("Form encoding")
struct FormEncodingTests {
    /// What `FormEncoding.escape` was before issue 30 wrote it byte by byte: Foundation's percent
    /// encoding with `%20` turned into `+`.
    private static func foundationEscape(_ text: String) -> String {
        let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._*")
        return text.addingPercentEncoding(withAllowedCharacters: unreserved)!.replacingOccurrences(of: "%20", with: "+")
    }

    @Test("Every ASCII character, non-ASCII text and a literal %20 escape as Foundation's percent encoding did")
    func sameAsFoundation() {
        let ascii = String(decoding: (1...127).map { UInt8($0) }, as: UTF8.self)
        let samples = [
            ascii, "", "a b+c", "100%20 off", "é ü ß 漢字 🙂", "0.AAAA-refresh_token*.~!'()", "openid profile offline_access https://graph.microsoft.com/.default",
            #"{"access_token":{"xms_cc":{"values":["cp1"]}}}"#,
        ]
        for sample in samples {
            #expect(FormEncoding.escape(sample) == Self.foundationEscape(sample), "\(sample.debugDescription)")
        }
        #expect(FormEncoding.escape("a b/é") == "a+b%2F%C3%A9")
    }

    @Test("Pairs are joined with = and &, names escaped like values")
    func pairs() {
        let encoded = FormEncoding.encode([("grant_type", "refresh_token"), ("scope", "User.Read offline_access"), ("a&b", "c=d")])
        #expect(encoded == "grant_type=refresh_token&scope=User.Read+offline_access&a%26b=c%3Dd")
        #expect(FormEncoding.encode([]) == "")
        #expect(FormEncoding.bytes([("grant_type", "refresh_token"), ("a b", "é")]) == Array("grant_type=refresh_token&a+b=%C3%A9".utf8))
    }
}
