import CryptoBridge
import Testing

/// Hex text → bytes, for known-answer vectors.
func cryptoTestBytes(hex: String) -> [UInt8] {
    let digits = Array(hex.utf8).filter { $0 != UInt8(ascii: " ") }
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
}

@Suite("Crypto: SHA-256, HMAC-SHA256, random, constant-time compare")
struct CryptoPrimitiveTests {
    // FIPS 180-4 examples (NIST CSRC "SHA256.pdf") and the empty string.
    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        ),
    ])
    func sha256KnownAnswers(message: String, digest: String) {
        #expect(SHA256.hash(Array(message.utf8)) == cryptoTestBytes(hex: digest))
        // In place from a string's storage: native, small (inline) and cut from a larger one.
        #expect(SHA256.hash(utf8: message) == cryptoTestBytes(hex: digest))
        let cut = String(("xx" + message + "yy").dropFirst(2).dropLast(2))
        #expect(SHA256.hash(utf8: cut) == cryptoTestBytes(hex: digest))
    }

    @Test func sha256OfMillionAs() {
        let message = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(SHA256.hash(message) == cryptoTestBytes(hex: "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"))
    }

    // RFC 4231 §4.2, §4.3, §4.4, §4.7, §4.8 (HMAC-SHA-256 rows).
    @Test(arguments: [
        (
            String(repeating: "0b", count: 20), "4869205468657265",
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        ),
        (
            "4a656665", "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        ),
        (
            String(repeating: "aa", count: 20), String(repeating: "dd", count: 50),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
        ),
        (
            String(repeating: "aa", count: 131),
            "54657374205573696e67204c6172676572205468616e20426c6f636b2d53697a65204b6579202d2048617368204b6579204669727374",
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        ),
        (
            String(repeating: "aa", count: 131),
            "5468697320697320612074657374207573696e672061206c6172676572207468616e20626c6f636b2d73697a65206b657920616e6420"
                + "61206c6172676572207468616e20626c6f636b2d73697a6520646174612e20546865206b6579206e6565647320746f20626520686173"
                + "686564206265666f7265206265696e6720757365642062792074686520484d414320616c676f726974686d2e",
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"
        ),
    ])
    func hmacSHA256RFC4231(key: String, data: String, mac: String) {
        #expect(HMACSHA256.authenticationCode(for: cryptoTestBytes(hex: data), key: cryptoTestBytes(hex: key)) == cryptoTestBytes(hex: mac))
    }

    /// RFC 7515 Appendix A.1: the HS256 JWS signature over its signing input.
    @Test func hmacSHA256RFC7515AppendixA1() throws {
        let key = try #require(Base64URL.decode("AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow"))
        let input = "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
        let mac = HMACSHA256.authenticationCode(for: Array(input.utf8), key: key)
        #expect(Base64URL.encode(mac) == "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
    }

    @Test func hmacWithEmptyKeyAndData() {
        // Python: hmac.new(b"", b"", hashlib.sha256).hexdigest()
        #expect(
            HMACSHA256.authenticationCode(for: [], key: [])
                == cryptoTestBytes(hex: "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad"))
    }

    @Test func secureRandomLengthsAndVariety() {
        #expect(SecureRandom.bytes(0).isEmpty)
        let a = SecureRandom.bytes(32), b = SecureRandom.bytes(32)
        #expect(a.count == 32 && b.count == 32)
        #expect(a != b)
    }

    @Test func constantTimeEquals() {
        #expect(ConstantTime.equals([], []))
        #expect(ConstantTime.equals([1, 2, 3], [1, 2, 3]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2, 4]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2]))
        #expect(!ConstantTime.equals([], [0]))
    }
}
