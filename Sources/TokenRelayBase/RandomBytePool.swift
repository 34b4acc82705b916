import CryptoBridge
import Synchronization

/// Cryptographically random bytes drawn from OpenSSL's DRBG four kilobytes at a time and handed
/// out 16 at a time: one `RAND_bytes` call (which asks the kernel for the process id to detect
/// forks) serves 256 correlation ids (a kilobyte's call was about 150 instructions of every id;
/// behaviour §10).
package final class RandomBytePool: Sendable {
    private struct Pool {
        var bytes: [UInt8] = []
        var offset = 0
    }

    private static let batch = 4096
    private let pool = Mutex(Pool())

    /// 16 random bytes never handed out before, as a tuple (no array to allocate).
    package func next16() -> (UInt64, UInt64) {
        pool.withLock { pool in
            if pool.offset + 16 > pool.bytes.count {
                pool.bytes = SecureRandom.bytes(Self.batch)
                pool.offset = 0
            }
            defer { pool.offset += 16 }
            return pool.bytes.withUnsafeBytes { raw in
                (raw.loadUnaligned(fromByteOffset: pool.offset, as: UInt64.self), raw.loadUnaligned(fromByteOffset: pool.offset + 8, as: UInt64.self))
            }
        }
    }
}
