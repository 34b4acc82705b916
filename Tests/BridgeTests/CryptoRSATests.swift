import CryptoBridge
import Testing

@Suite("Crypto: RSA signatures")
struct CryptoRSATests {
    /// One 2048-bit key for the suite: generation costs tens of milliseconds.
    static let privateKey: RSAPrivateKey = try! RSAPrivateKey.generate()

    // RFC 7515 Appendix A.2: an RS256 JWS and the JWK of its public key.
    static let appendixA2Modulus =
        "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ"
    static let appendixA2SigningInput =
        "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    static let appendixA2Signature =
        "cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw"

    @Test(arguments: [SignatureAlgorithm.rs256, .ps256])
    func signThenVerify(algorithm: SignatureAlgorithm) throws {
        let message = Array("header.payload".utf8)
        let signature = try Self.privateKey.sign(message, algorithm: algorithm)
        #expect(signature.count == 256)
        #expect(Self.privateKey.publicKey.verify(signature: signature, for: message, algorithm: algorithm))
        #expect(!Self.privateKey.publicKey.verify(signature: signature, for: Array("header.payloaD".utf8), algorithm: algorithm))
        var altered = signature
        altered[100] ^= 0x01
        #expect(!Self.privateKey.publicKey.verify(signature: altered, for: message, algorithm: algorithm))
        #expect(!Self.privateKey.publicKey.verify(signature: Array(signature.dropLast()), for: message, algorithm: algorithm))
        #expect(!Self.privateKey.publicKey.verify(signature: [], for: message, algorithm: algorithm))
    }

    @Test func algorithmsAreNotInterchangeable() throws {
        let message = Array("m".utf8)
        let rs = try Self.privateKey.sign(message, algorithm: .rs256)
        #expect(!Self.privateKey.publicKey.verify(signature: rs, for: message, algorithm: .ps256))
        let ps = try Self.privateKey.sign(message, algorithm: .ps256)
        #expect(!Self.privateKey.publicKey.verify(signature: ps, for: message, algorithm: .rs256))
    }

    @Test func rs256IsDeterministicPS256IsNot() throws {
        let message = Array("m".utf8)
        #expect(try Self.privateKey.sign(message, algorithm: .rs256) == Self.privateKey.sign(message, algorithm: .rs256))
        #expect(try Self.privateKey.sign(message, algorithm: .ps256) != Self.privateKey.sign(message, algorithm: .ps256))
    }

    @Test func verifiesRFC7515AppendixA2() throws {
        let key = try RSAPublicKey(
            modulus: try #require(Base64URL.decode(Self.appendixA2Modulus)), exponent: try #require(Base64URL.decode("AQAB")))
        let signature = try #require(Base64URL.decode(Self.appendixA2Signature))
        let input = Array(Self.appendixA2SigningInput.utf8)
        #expect(key.verify(signature: signature, for: input, algorithm: .rs256))
        #expect(!key.verify(signature: signature, for: input + [0x20], algorithm: .rs256))
        #expect(!key.verify(signature: signature, for: input, algorithm: .ps256))
        #expect(Base64URL.encode(key.modulus) == Self.appendixA2Modulus)
        #expect(key.exponent == [0x01, 0x00, 0x01])
    }

    @Test func publicKeyFromParametersEqualsPrivateKeysPublicHalf() throws {
        let half = Self.privateKey.publicKey
        #expect(half.modulus.count == 256)
        #expect(half.exponent == [0x01, 0x00, 0x01])
        let rebuilt = try RSAPublicKey(modulus: half.modulus, exponent: half.exponent)
        #expect(rebuilt == half)
        // Leading zero bytes (allowed in some JWKs) do not change the key.
        #expect(try RSAPublicKey(modulus: [0] + half.modulus, exponent: half.exponent) == half)
        let message = Array("rebuilt".utf8)
        #expect(rebuilt.verify(signature: try Self.privateKey.sign(message, algorithm: .rs256), for: message, algorithm: .rs256))
        #expect(rebuilt != (try RSAPrivateKey.generate().publicKey))
    }

    @Test func pemRoundTrips() throws {
        let pem = try Self.privateKey.pemRepresentation()
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let reloaded = try RSAPrivateKey(pem: pem)
        #expect(reloaded.publicKey == Self.privateKey.publicKey)
        let message = Array("pem".utf8)
        #expect(Self.privateKey.publicKey.verify(signature: try reloaded.sign(message, algorithm: .rs256), for: message, algorithm: .rs256))

        let publicPEM = try Self.privateKey.publicKey.pemRepresentation()
        #expect(publicPEM.hasPrefix("-----BEGIN PUBLIC KEY-----"))
        #expect(try RSAPublicKey(pem: publicPEM) == Self.privateKey.publicKey)
    }

    @Test func rejectsBadInput() {
        #expect(throws: CryptoError.self) { try RSAPrivateKey(pem: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n") }
        #expect(throws: CryptoError.self) { try RSAPublicKey(pem: "not a pem") }
        #expect(throws: CryptoError.self) { try RSAPublicKey(modulus: [], exponent: [1, 0, 1]) }
        #expect(throws: CryptoError.self) { try RSAPrivateKey.generate(bits: 1024) }
    }
}
