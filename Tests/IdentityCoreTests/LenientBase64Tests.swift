import Foundation
import Testing

@testable import IdentityCore

/// The lenient base64 of `client_info`, JWT segments and `claims` (behaviour §5 "parsed
/// leniently"): decoded byte by byte since issue 30, as Foundation decoded it before.
@Suite("Lenient base64")
struct LenientBase64Tests {
    @Test("Either alphabet, padding or none, white space around: the same bytes or refusal as the Foundation decoding")
    func sameAsFoundation() {
        var samples = [
            "", "   ", "QQ", "QQ==", "QR==", "QUI", "QUJ=", "QUJD", "Q", "Q===", "QQ=A", "QQ= =", " QQ==\n", "\tQUJD\r\n", "Q Q==", "QQ==  ",
            "-_-_", "+/+/", "-_+/", "a-b_c+d/", "QUJD!", "QUJDRA", "QUJDRA=", "QUJDRA==", "QUJDRA===", "eyJ1aWQiOiJ4In0", "eyJ1aWQiOiJ4In0=",
            "\u{00A0}QQ==\u{00A0}", "\u{2003}QQ==", "QQ==\u{0085}", "é", "QQ\u{00E9}",
        ]
        // Every length up to 12 of a few symbol mixes, so every padding case and leftover bit is seen.
        let alphabet = Array("AZaz09+/-_=. ")
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for length in 0...12 {
            for _ in 0..<40 {
                var text = ""
                for _ in 0..<length {
                    state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                    text.append(alphabet[Int(state >> 33) % alphabet.count])
                }
                samples.append(text)
            }
        }
        for sample in samples {
            #expect(Base64URL.decode(sample) == Base64URL.decodeThroughFoundation(sample), "\(sample.debugDescription)")
        }
        #expect(Base64URL.decode(" eyJ1aWQiOiJ4In0\n") == Array(#"{"uid":"x"}"#.utf8))
    }
}
