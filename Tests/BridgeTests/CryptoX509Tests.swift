import CryptoBridge
import Foundation
import Testing
import TokenRelayTesting

@Suite("Crypto: X.509 certificates and thumbprints")
struct CryptoX509Tests {
    @Test("A PEM with key and certificate gives the key, the DER certificate and its thumbprints")
    func certificateAndKeyFromOnePEM() async throws {
        let files = try await TestCertificate.make(days: 3)
        defer { files.remove() }
        let combined = try String(contentsOfFile: files.combinedPath, encoding: .utf8)
        let certificate = try X509Certificate(pem: combined)
        let key = try RSAPrivateKey(pem: combined)
        #expect(certificate.publicKey == key.publicKey)
        #expect(certificate.sha256Thumbprint == (try files.sha256Thumbprint()))
        #expect(certificate.sha1Thumbprint.count == 27)
        let now = Int(Date().timeIntervalSince1970)
        #expect(abs(certificate.notAfter - (now + 3 * 86_400)) < 120)
        let message = Array("header.payload".utf8)
        #expect(certificate.publicKey.verify(signature: try key.sign(message, algorithm: .ps256), for: message, algorithm: .ps256))
        #expect(throws: CryptoError.self) { try X509Certificate(pem: try String(contentsOfFile: files.keyPath, encoding: .utf8)) }
    }

    @Test("SHA-1 matches the FIPS 180 test vector")
    func sha1Vector() {
        let hex = SHA1.hash(Array("abc".utf8)).map { String(format: "%02x", $0) }.joined()
        #expect(hex == "a9993e364706816aba3e25717850c26c9cd0d89d")
    }
}
