import Foundation
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

@Suite("Key ring, token envelope, API keys and log redaction")
struct SecurityTests {
    static let key = Data(repeating: 1, count: 32).base64EncodedString()

    @Test("The key ring parses id:base64 entries; the first key encrypts")
    func keyRing() throws {
        let ring = try KeyRing(parsing: "new:\(Self.key), old:\(Data(repeating: 2, count: 32).base64EncodedString())")
        #expect(ring.primary.id == "new")
        #expect(ring.keys.map(\.id) == ["new", "old"])
    }

    @Test("Bad key rings are refused without echoing key material", arguments: ["", "nokey", "a:c2hvcnQ=", "a:\(key),a:\(key)", "bad id:\(key)"])
    func badKeyRing(text: String) {
        #expect(throws: KeyRingError.self) { try KeyRing(parsing: text) }
        if let error = try? KeyRing(parsing: text) { Issue.record("accepted \(error.keys.count) keys") }
    }

    @Test("A sealed token opens only for its own owner, kind and client (AAD binding)")
    func envelopeBinding() throws {
        let cipher = TokenCipher(ring: try KeyRing(parsing: "k1:\(Self.key)"))
        let context = SealingContext(owner: "acc_1", kind: .refreshToken, clientId: "client")
        let sealed = try cipher.seal("1.AXkA-refresh", for: context)
        #expect(sealed.keyId == "k1")
        #expect(sealed.nonce.count == 12)
        #expect(!String(decoding: sealed.ciphertext, as: UTF8.self).contains("AXkA"))
        #expect(try cipher.open(sealed, for: context) == "1.AXkA-refresh")
        for other in [
            SealingContext(owner: "acc_2", kind: .refreshToken, clientId: "client"),
            SealingContext(owner: "acc_1", kind: .accessToken, clientId: "client"),
            SealingContext(owner: "acc_1", kind: .refreshToken, clientId: "other"),
        ] {
            #expect(throws: TokenCipherError.self) { try cipher.open(sealed, for: other) }
        }
        // After rotation to [new, old], old ciphertexts still open; new ones use the new key.
        let rotated = TokenCipher(ring: try KeyRing(parsing: "k2:\(Data(repeating: 9, count: 32).base64EncodedString()),k1:\(Self.key)"))
        #expect(try rotated.open(sealed, for: context) == "1.AXkA-refresh")
        #expect(try rotated.seal("x", for: context).keyId == "k2")
    }

    @Test("The authenticated data is tokenrelay.v1|owner|kind|client: rows sealed before still open")
    func additionalDataLayout() {
        for (owner, kind, client) in [("acc_1", SealingContext.Kind.refreshToken, "client"), ("ünïcødé|x", .accessToken, ""), ("", .pkceVerifier, "c")] {
            let context = SealingContext(owner: owner, kind: kind, clientId: client, tenantId: "T")
            #expect(context.additionalData == Array("tokenrelay.v1|\(owner)|\(kind.rawValue)|\(client)".utf8))
        }
    }

    @Test("Copies of a cipher share one ring (reloaded on SIGHUP) and one count of encryptions per key")
    func reloadAndCounts() throws {
        let cipher = TokenCipher(ring: try KeyRing(parsing: "k1:\(Self.key)"))
        let copy = cipher
        let context = SealingContext(owner: "acc_1", kind: .accessToken, clientId: "client")
        let old = try cipher.seal("a", for: context)
        _ = try copy.seal("b", for: context)
        copy.reload(try KeyRing(parsing: "k2:\(Data(repeating: 7, count: 32).base64EncodedString()),k1:\(Self.key)"))
        #expect(try cipher.seal("c", for: context).keyId == "k2")
        #expect(try cipher.open(old, for: context) == "a")
        #expect(cipher.takeUnflushedCounts() == ["k1": 2, "k2": 1])
        #expect(copy.takeUnflushedCounts().isEmpty)
        cipher.restoreUnflushedCounts(["k2": 5])
        _ = try cipher.seal("d", for: context)
        #expect(cipher.takeUnflushedCounts() == ["k2": 6])
    }

    @Test("API keys split at the first two underscores; the secret may contain more")
    func apiKeySplit() {
        #expect(APIKeyAuthenticator.split("trk_abcd1234_se_cr_et")! == ("abcd1234", "se_cr_et"))
        #expect(APIKeyAuthenticator.split("trk_short_secret") == nil)
        #expect(APIKeyAuthenticator.split("trk_ABCDEFGH_secret") == nil)
        #expect(APIKeyAuthenticator.split("abc_abcdefgh_secret") == nil)
        #expect(APIKeyAuthenticator.split("trk_abcdefgh_") == nil)
        #expect(APIKeyAuthenticator.split("trk_abcdefghsecret") == nil)
        #expect(APIKeyAuthenticator.split("trk_abcdéfgh_secret") == nil)
        #expect(APIKeyAuthenticator.bearerToken("Bearer  trk_x ") == "trk_x")
        #expect(APIKeyAuthenticator.bearerToken("Basic abc") == nil)
    }

    @Test("Log fields that may hold a secret are masked; usernames only with log_pii")
    func redaction() {
        let sink = LogSink.memory()
        let logger = Logger(level: .debug, logPII: false, sink: sink)
        logger.info(
            "test",
            [
                "refresh_token": "1.AXkA", "client_secret": "s3cr3t", "authorization": "Bearer trk", "code": "abc", "username": "alice@x",
                "account.id": "acc_1", "sts.error_codes": "50173",
            ])
        let line = sink.captured.joined()
        for secret in ["1.AXkA", "s3cr3t", "Bearer trk", "\"abc\"", "alice@x"] {
            #expect(!line.contains(secret), "\(secret) leaked")
        }
        #expect(line.contains("acc_1"))
        #expect(line.contains("50173"))
        let withPII = LogSink.memory()
        Logger(level: .info, logPII: true, sink: withPII).info("test", ["username": "alice@x"])
        #expect(withPII.captured.joined().contains("alice@x"))
    }
}
