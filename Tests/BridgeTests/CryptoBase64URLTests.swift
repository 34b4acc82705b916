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
}
