import CryptoBridge

/// HMAC-SHA256 under keys derived from the encryption key ring (behaviour §11): for each ring key,
/// HMAC-SHA256(key, `purpose`), so no new secret setting exists, every replica (same ring)
/// derives the same keys, and each purpose (`sign-in-start` links, `page-cursor` cursors) has
/// keys of its own. The first key signs; every key verifies, so a ring rotation breaks nothing
/// in flight, and a key dropped from the ring (SIGHUP) stops verifying at once.
package struct RingSigner: Sendable {
    private let ring: @Sendable () -> KeyRing
    private let purpose: [UInt8]

    /// - Parameters:
    ///   - ring: the encryption key ring in use now.
    ///   - purpose: what the keys sign, so that one purpose's tags are never another's.
    package init(ring: @escaping @Sendable () -> KeyRing, purpose: String) {
        self.ring = ring
        self.purpose = Array(purpose.utf8)
    }

    /// The derived keys of the current ring; the first signs.
    package var keys: [[UInt8]] {
        ring().keys.map { HMACSHA256.authenticationCode(for: purpose, key: $0.bytes) }
    }

    /// HMAC-SHA256 of `message` (32 bytes) under the first derived key (only that one is derived).
    package func sign(_ message: [UInt8]) -> [UInt8] {
        HMACSHA256.authenticationCode(for: message, key: HMACSHA256.authenticationCode(for: purpose, key: ring().keys[0].bytes))
    }

    /// Whether `tag` is the HMAC-SHA256 of `message` under any derived key (compared in constant time).
    package func verify(_ message: [UInt8], tag: [UInt8]) -> Bool {
        keys.contains { ConstantTime.equals(HMACSHA256.authenticationCode(for: message, key: $0), tag) }
    }
}
