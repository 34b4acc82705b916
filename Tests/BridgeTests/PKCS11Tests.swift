import CryptoBridge
import Foundation
import PKCS11Bridge
import Synchronization
import Testing
import TokenRelayTesting

/// The PKCS#11 bridge against a real SoftHSM2 token (issue 12 part 1): the key-encryption key is
/// generated inside the token, data keys are sealed and opened there, and every failure names the
/// PKCS#11 function and its CKR_* code.
@Suite("PKCS#11 bridge (SoftHSM2)", .enabled(if: SoftHSM.isInstalled, "softhsm2 is not installed (scripts/install-deps)"))
struct PKCS11Tests {
    /// The process's token (SoftHSM finds tokens once per process, see `SoftHSM`).
    static func newToken() throws -> (label: String, pin: String) {
        try #require(SoftHSM.shared.processToken, "\(SoftHSM.shared.processTokenError ?? "")")
    }

    /// A key label no other test uses in the shared token.
    static func label(_ name: String) -> String { name + "-" + UUID().uuidString.prefix(8).lowercased() }

    @Test("A key generated in the token seals a data key and opens it again; the sealed bytes are nonce, ciphertext and tag")
    func sealAndOpen() throws {
        let token = try Self.newToken()
        let module = try PKCS11Module.load(path: SoftHSM.modulePath)
        let session = try module.openSession(tokenLabel: token.label, pin: token.pin)
        let label = Self.label("kek")
        #expect(try session.findAESKey(label: label) == nil)
        let kek = try session.generateAESKey(label: label)
        #expect(try session.findAESKey(label: label) == kek)

        let dataKey = SecureRandom.bytes(32)
        let aad = Array("tokenrelay:data-key:v1:tenant-a".utf8)
        let sealed = try session.seal(dataKey, key: kek, associatedData: aad)
        #expect(sealed.count == PKCS11Session.nonceBytes + 32 + PKCS11Session.tagBytes)
        #expect(try session.open(sealed, key: kek, associatedData: aad) == dataKey)
        // A fresh nonce every time: the same key sealed twice gives different bytes.
        let again = try session.seal(dataKey, key: kek, associatedData: aad)
        #expect(again != sealed)
        #expect(try session.open(again, key: kek, associatedData: aad) == dataKey)
    }

    @Test("Tampered bytes, other associated data or another key do not open: an authentication failure, not other bytes")
    func tamperingRefused() throws {
        let token = try Self.newToken()
        let session = try PKCS11Module.load(path: SoftHSM.modulePath).openSession(tokenLabel: token.label, pin: token.pin)
        let kek = try session.generateAESKey(label: Self.label("kek"))
        let other = try session.generateAESKey(label: Self.label("other"))
        let aad = Array("tenant-a".utf8)
        let sealed = try session.seal(Array(repeating: 7, count: 32), key: kek, associatedData: aad)
        var flipped = sealed
        flipped[PKCS11Session.nonceBytes + 3] ^= 0x01
        for (bytes, key, data) in [(flipped, kek, aad), (sealed, kek, Array("tenant-b".utf8)), (sealed, other, aad)] {
            #expect {
                _ = try session.open(bytes, key: key, associatedData: data)
            } throws: { error in
                guard let error = error as? PKCS11Error else { return false }
                return error.function == "C_Decrypt" && error.isAuthenticationFailure
            }
        }
        #expect(throws: PKCS11Error.self) { _ = try session.open(Array(sealed.prefix(20)), key: kek, associatedData: aad) }
    }

    /// What sessions working on threads of their own record: failures, searches made, generators still at work.
    final class ParallelSessions: Sendable {
        let failures = Mutex<[String]>([])
        let searches = Atomic<Int>(0)
        let generating: Atomic<Int>
        init(generators: Int) { generating = Atomic(generators) }
        func record(_ error: any Error) { failures.withLock { $0.append("\(error)") } }
    }

    /// SoftHSM2 2.6 rereads every object of the token in `C_FindObjectsInit`; a key another session
    /// was writing then failed to generate (`PKCS11Module.objectStoreTurn`), about one in three here.
    @Test("Keys generated while another session of the process searches the token are all made")
    func generateWhileSearching() async throws {
        let token = try Self.newToken()
        let module = try PKCS11Module.load(path: SoftHSM.modulePath)
        let searcher = try module.openSession(tokenLabel: token.label, pin: token.pin)
        let generators = try (0..<2).map { _ in try module.openSession(tokenLabel: token.label, pin: token.pin) }
        // Closed here: the last reference may go with a task or thread after the test ends, and SoftHSM
        // crashes closing a session while the process exits.
        defer { ([searcher] + generators).forEach { $0.close() } }
        let run = ParallelSessions(generators: generators.count)
        // Threads of their own: every call blocks in the module, and each side waits for the other.
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await onOwnThread {
                    while run.generating.load(ordering: .relaxed) > 0 {
                        do { _ = try searcher.findAESKey(label: "absent") } catch { run.record(error) }
                        run.searches.add(1, ordering: .relaxed)
                    }
                }
            }
            for session in generators {
                group.addTask {
                    await onOwnThread {
                        while run.searches.load(ordering: .relaxed) == 0 { Thread.sleep(forTimeInterval: 0.001) }
                        // Destroyed again: every search rereads every key of the process's token.
                        for _ in 0..<30 {
                            do { try session.destroy(try session.generateAESKey(label: Self.label("parallel"))) } catch { run.record(error) }
                        }
                        run.generating.subtract(1, ordering: .relaxed)
                    }
                }
            }
        }
        let failures = run.failures.withLock { $0 }
        #expect(failures.count == 0, "\(failures.count) calls failed: \(Set(failures).sorted())")
    }

    @Test("A wrong PIN is CKR_PIN_INCORRECT from C_Login; an unknown token label names the labels found")
    func wrongPinAndLabel() throws {
        let token = try Self.newToken()
        let module = try PKCS11Module.load(path: SoftHSM.modulePath)
        do {
            _ = try module.openSession(tokenLabel: SoftHSM.shared.neverLoggedInLabel, pin: "not-the-pin")
            Issue.record("a wrong PIN opened a session")
        } catch {
            #expect(error.function == "C_Login")
            #expect(error.codeName == "CKR_PIN_INCORRECT")
            #expect(error.isPINRefused)
            #expect(!error.description.contains("not-the-pin"))
        }
        do {
            _ = try module.openSession(tokenLabel: "no-such-token", pin: token.pin)
            Issue.record("an unknown label opened a session")
        } catch {
            #expect(error.function == "C_GetTokenInfo")
            #expect(error.reason.contains("no-such-token"))
            #expect(error.reason.contains(token.label))
            #expect(!error.description.contains(token.pin))
        }
    }

    @Test("A destroyed key can no longer open what it sealed (crypto-shredding)")
    func destroyedKey() throws {
        let token = try Self.newToken()
        let session = try PKCS11Module.load(path: SoftHSM.modulePath).openSession(tokenLabel: token.label, pin: token.pin)
        let key = try session.generateAESKey(label: Self.label("tenant-key"))
        let sealed = try session.seal(Array(repeating: 1, count: 32), key: key, associatedData: [])
        try session.destroy(key)
        #expect(try session.findAESKey(label: key.label) == nil)
        #expect(throws: PKCS11Error.self) { _ = try session.open(sealed, key: key, associatedData: []) }
    }

    @Test("A path that is not a PKCS#11 module fails in dlopen or dlsym, naming it")
    func badModule() throws {
        do {
            _ = try PKCS11Module.load(path: "/nonexistent/libpkcs11.so")
            Issue.record("a missing module loaded")
        } catch {
            #expect(error.function == "dlopen")
            #expect(error.reason.contains("/nonexistent/libpkcs11.so"))
        }
        do {
            _ = try PKCS11Module.load(path: "/usr/lib/x86_64-linux-gnu/libz.so.1")
            Issue.record("libz loaded as a PKCS#11 module")
        } catch {
            #expect(error.function == "dlsym")
        }
    }

    @Test("A closed session refuses further calls with CKR_SESSION_CLOSED")
    func closedSession() throws {
        let token = try Self.newToken()
        let session = try PKCS11Module.load(path: SoftHSM.modulePath).openSession(tokenLabel: token.label, pin: token.pin)
        session.close()
        #expect {
            _ = try session.findAESKey(label: "x")
        } throws: { error in
            (error as? PKCS11Error)?.codeName == "CKR_SESSION_CLOSED"
        }
    }
}
