import CryptoBridge
import Testing

@Suite("Crypto: AES-256-GCM")
struct CryptoAESGCMTests {
    let key = SecureRandom.bytes(32)
    let aad = Array("account:42".utf8)

    @Test(arguments: [0, 1, 15, 16, 17, 1024])
    func roundTrip(length: Int) throws {
        let plaintext = SecureRandom.bytes(length)
        let sealed = try AES256GCM.seal(plaintext, key: key, authenticating: aad)
        #expect(sealed.nonce.count == 12)
        #expect(sealed.ciphertext.count == length + 16)
        #expect(try AES256GCM.open(sealed.ciphertext, nonce: sealed.nonce, key: key, authenticating: aad) == plaintext)
    }

    @Test func freshNonceEachSeal() throws {
        let a = try AES256GCM.seal([1, 2, 3], key: key, authenticating: [])
        let b = try AES256GCM.seal([1, 2, 3], key: key, authenticating: [])
        #expect(a.nonce != b.nonce)
        #expect(a.ciphertext != b.ciphertext)
    }

    @Test func emptyAADRoundTrip() throws {
        let sealed = try AES256GCM.seal(Array("secret".utf8), key: key, authenticating: [])
        #expect(try AES256GCM.open(sealed.ciphertext, nonce: sealed.nonce, key: key, authenticating: []) == Array("secret".utf8))
    }

    /// NIST GCM test vector (gcmEncryptExtIV256, Count 0 with 128-bit plaintext): fixes the format
    /// of `ciphertext || tag` against an outside source.
    @Test func openKnownAnswer() throws {
        let key = cryptoTestBytes(hex: "0000000000000000000000000000000000000000000000000000000000000000")
        let nonce = cryptoTestBytes(hex: "000000000000000000000000")
        let sealed = cryptoTestBytes(hex: "cea7403d4d606b6e074ec5d3baf39d18" + "d0d1c8a799996bf0265b98b5d48ab919")
        #expect(try AES256GCM.open(sealed, nonce: nonce, key: key, authenticating: []) == [UInt8](repeating: 0, count: 16))
    }

    @Test func tamperingFails() throws {
        let plaintext = Array("refresh-token-bytes".utf8)
        let sealed = try AES256GCM.seal(plaintext, key: key, authenticating: aad)

        var ciphertext = sealed.ciphertext
        ciphertext[0] ^= 0x01
        expectAuthenticationFailure { try AES256GCM.open(ciphertext, nonce: sealed.nonce, key: key, authenticating: aad) }

        var tag = sealed.ciphertext
        tag[tag.count - 1] ^= 0x80
        expectAuthenticationFailure { try AES256GCM.open(tag, nonce: sealed.nonce, key: key, authenticating: aad) }

        expectAuthenticationFailure { try AES256GCM.open(sealed.ciphertext, nonce: sealed.nonce, key: key, authenticating: aad + [0]) }
        expectAuthenticationFailure { try AES256GCM.open(sealed.ciphertext, nonce: sealed.nonce, key: key, authenticating: []) }

        var nonce = sealed.nonce
        nonce[5] ^= 0x10
        expectAuthenticationFailure { try AES256GCM.open(sealed.ciphertext, nonce: nonce, key: key, authenticating: aad) }

        expectAuthenticationFailure {
            try AES256GCM.open(sealed.ciphertext, nonce: sealed.nonce, key: SecureRandom.bytes(32), authenticating: aad)
        }
        expectAuthenticationFailure {
            try AES256GCM.open(Array(sealed.ciphertext.dropLast()), nonce: sealed.nonce, key: key, authenticating: aad)
        }
    }

    @Test func rejectsBadShapes() throws {
        #expect(throws: CryptoError.self) { try AES256GCM.seal([1], key: SecureRandom.bytes(16), authenticating: []) }
        #expect(throws: CryptoError.self) { try AES256GCM.open([UInt8](repeating: 0, count: 16), nonce: [0], key: key, authenticating: []) }
        #expect(throws: CryptoError.self) { try AES256GCM.open([1, 2, 3], nonce: SecureRandom.bytes(12), key: key, authenticating: []) }
    }

    @Test func errorDescriptionNamesFunctionNotKey() throws {
        let sealed = try AES256GCM.seal([1, 2, 3], key: key, authenticating: [])
        do {
            _ = try AES256GCM.open(sealed.ciphertext, nonce: sealed.nonce, key: SecureRandom.bytes(32), authenticating: [])
            Issue.record("open with a wrong key succeeded")
        } catch let error as CryptoError {
            #expect(error.description.contains("EVP_DecryptFinal_ex"))
            #expect(!error.description.contains(Base64URL.encode(key)))
        }
    }

    private func expectAuthenticationFailure(
        _ body: () throws -> [UInt8], sourceLocation: SourceLocation = #_sourceLocation
    ) {
        do {
            _ = try body()
            Issue.record("open succeeded on altered input", sourceLocation: sourceLocation)
        } catch let error as CryptoError {
            #expect(
                error.kind == .authenticationFailed || error.kind == .invalidInput, "\(error)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
        }
    }
}
