import CryptoBridge
import Testing

@Suite("Crypto: Base64URL")
struct CryptoBase64URLTests {
    // RFC 4648 §10 vectors, padding removed.
    @Test(arguments: [("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy")])
    func rfc4648Vectors(plain: String, encoded: String) {
        #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
        #expect(Base64URL.decode(encoded) == Array(plain.utf8))
    }

    @Test func decodesWithPadding() {
        #expect(Base64URL.decode("Zg==") == Array("f".utf8))
        #expect(Base64URL.decode("Zm8=") == Array("fo".utf8))
        #expect(Base64URL.decode("Zm9v") == Array("foo".utf8))
    }

    @Test func usesURLSafeAlphabet() {
        // 0xfb 0xff 0xbf encodes to "+/+/" in standard base64.
        #expect(Base64URL.encode([0xfb, 0xff, 0xbf]) == "-_-_")
        #expect(Base64URL.decode("-_-_") == [0xfb, 0xff, 0xbf])
        #expect(Base64URL.encode([0xff]) == "_w")
        #expect(Base64URL.decode("_w") == [0xff])
    }

    @Test(arguments: ["+/+/", "Zm9v!", "Z", "Zm9vY", "Zg=", "Zg===", "Z===", "Zm9 v", "=Zm9"])
    func rejectsMalformed(text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test func roundTripsEveryLength() {
        for length in 0..<70 {
            let bytes = SecureRandom.bytes(length)
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(Base64URL.decode(text) == bytes)
            let padded = text + String(repeating: "=", count: (4 - text.count % 4) % 4)
            #expect(Base64URL.decode(padded) == bytes)
        }
    }

    /// An identifier has one spelling: text whose unused low bits are not zero decodes to the
    /// same bytes as the canonical text, and was taken as that identifier (a `sign_in_id` with
    /// its last character changed was accepted and echoed; found by the new-user try).
    @Test func canonicalDecoderRefusesOtherSpellings() {
        #expect(Base64URL.decodeCanonical("Zg") == Array("f".utf8))
        #expect(Base64URL.decodeCanonical("Zm8") == Array("fo".utf8))
        #expect(Base64URL.decodeCanonical("") == [])
        for text in ["Zh", "Zm9", "Zm_", "_x", "Zg==", "Zm8=", "Z", "+/+/", "Zm9 v"] {
            #expect(Base64URL.decodeCanonical(text) == nil, "\(text)")
        }
        // Every length, every spelling of the last character that the lenient decoder reads as the same bytes.
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        for length in 1..<40 {
            let bytes = SecureRandom.bytes(length)
            let text = Base64URL.encode(bytes)
            #expect(Base64URL.decodeCanonical(text) == bytes)
            for symbol in alphabet where symbol != text.last! {
                let other = String(text.dropLast()) + String(symbol)
                if Base64URL.decode(other) == bytes { #expect(Base64URL.decodeCanonical(other) == nil, "\(other)") }
            }
        }
    }
}
