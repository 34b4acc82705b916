import CryptoBridge
import Foundation
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayOperations
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

/// Settings of the keep-alive job and the webhook, the signature format, and the event cursor.
@Suite("Keep-alive and webhook settings, signature, event cursor")
struct EventsAndKeepAliveUnitTests {
    @Test("Keep-alive and webhook defaults")
    func defaults() throws {
        let config = try ConfigurationLoader(environment: ConfigurationTests.valid).load()
        #expect(config.keepAlive.afterDays == 60)
        #expect(config.keepAlive.maxPerMinute == 30)
        #expect(config.keepAlive.intervalSeconds == 3600)
        #expect(config.webhooks.url == nil)
        #expect(config.webhooks.maxBackoffSeconds == 300)
    }

    @Test(
        "A bad keep-alive or webhook setting stops start-up naming it",
        arguments: [
            (["TOKENRELAY_KEEPALIVE_AFTER_DAYS": "90"], "TOKENRELAY_KEEPALIVE_AFTER_DAYS"),
            (["TOKENRELAY_KEEPALIVE_MAX_PER_MINUTE": "0"], "TOKENRELAY_KEEPALIVE_MAX_PER_MINUTE"),
            (["TOKENRELAY_WEBHOOK_URL": "https://hooks.example/tokenrelay"], "TOKENRELAY_WEBHOOK_SECRET"),
            (["TOKENRELAY_WEBHOOK_URL": "http://hooks.example/tokenrelay", "TOKENRELAY_WEBHOOK_SECRET": "s"], "TOKENRELAY_WEBHOOK_URL"),
            (["TOKENRELAY_WEBHOOK_URL": "http://127.0.0.1:9/hook", "TOKENRELAY_WEBHOOK_SECRET": "s"], "TOKENRELAY_WEBHOOK_URL"),
        ])
    func invalid(settings: [String: String], named: String) {
        #expect {
            try ConfigurationLoader(environment: ConfigurationTests.valid.merging(settings) { $1 }).load()
        } throws: { error in
            (error as? ConfigurationError)?.setting == named
        }
    }

    @Test("The webhook secret is read from TOKENRELAY_WEBHOOK_SECRET_FILE; loopback http needs TOKENRELAY_ALLOW_HTTP_LOOPBACK")
    func secretFromFile() throws {
        let path = NSTemporaryDirectory() + "tokenrelay-webhook-secret-\(UUID().uuidString)"
        try "from-a-file\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let config = try ConfigurationLoader(
            environment: ConfigurationTests.valid.merging([
                "TOKENRELAY_WEBHOOK_URL": "http://127.0.0.1:9/hook", "TOKENRELAY_ALLOW_HTTP_LOOPBACK": "true", "TOKENRELAY_WEBHOOK_SECRET_FILE": path,
            ]) { $1 }
        ).load()
        #expect(config.webhooks.secret == "from-a-file")
    }

    @Test("TokenRelay-Signature is t=<unix>,v1=<hex HMAC-SHA256 of \"t.body\">")
    func signature() {
        // Expected value from Python: hmac.new(b"Jefe", b"0.do ya want for nothing?", hashlib.sha256).hexdigest()
        let header = WebhookDeliverer.signature(body: Array("do ya want for nothing?".utf8), timestamp: 0, secret: Array("Jefe".utf8))
        #expect(header == "t=0,v1=52ddb3ab53c970f3efbfb0e41f2f6d7a88ff6966673d1f56bf3eede5458ba678")
        let other = WebhookDeliverer.signature(body: Array("do ya want for nothing?".utf8), timestamp: 1, secret: Array("Jefe".utf8))
        #expect(other.dropFirst(4) != header.dropFirst(4), "the timestamp is signed")
    }

    @Test("Event cursors round-trip under any key of the ring; unsigned, foreign and other rings' cursors are refused")
    func cursor() throws {
        let keyA = "a:" + Data(repeating: 1, count: 32).base64EncodedString()
        let keyB = "b:" + Data(repeating: 2, count: 32).base64EncodedString()
        let ring = try KeyRing(parsing: keyA)
        let rotated = try KeyRing(parsing: keyB + "," + keyA)
        let other = try KeyRing(parsing: keyB)
        let signer = PageCursor.signer(ring: { ring })
        let issued = EventRoutes.Cursor.encode(42, signer: signer)
        #expect(EventRoutes.Cursor.decode(issued, signer: signer) == 42)
        #expect(EventRoutes.Cursor.decode(issued, signer: PageCursor.signer(ring: { rotated })) == 42, "a rotation keeps cursors in flight")
        #expect(EventRoutes.Cursor.decode(issued, signer: PageCursor.signer(ring: { other })) == nil)
        #expect(EventRoutes.Cursor.decode(issued, signer: RingSigner(ring: { ring }, purpose: "sign-in-start")) == nil, "keys of another purpose")
        #expect(AuditRoutes.Cursor.decode(issued, signer: signer) == nil)
        #expect(EventRoutes.Cursor.decode(AccountRoutes.Cursor.encode("acc_1"), signer: signer) == nil)
        #expect(EventRoutes.Cursor.decode("%%", signer: signer) == nil)
        // Unsigned, as cursors were before: a made-up position was read as one.
        for forged in ["e:42", "e:01", "e:+1", "e: 1", "e:-1"] {
            #expect(EventRoutes.Cursor.decode(Base64URL.encode(Array(forged.utf8)), signer: signer) == nil, "\(forged)")
        }
        // Only the form the service writes, signed or not (new-user attack: `e:01` and `e:+1` were echoed back).
        for forged in ["e:01", "e:+1", "e: 1", "e:-1"] {
            let text = Array(forged.utf8)
            #expect(EventRoutes.Cursor.decode(Base64URL.encode(text + signer.sign(text)), signer: signer) == nil, "\(forged)")
        }
    }
}
