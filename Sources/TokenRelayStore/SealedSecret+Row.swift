import PostgresBridge
import TokenRelayBase

extension SealedSecret {
    /// The sealed secret in a row's `key_id`, `nonce` and `ciphertext` columns (every token
    /// table stores them so); a missing column reads as empty, which no key opens.
    package init(row: PostgresRow) {
        self.init(keyId: row.string("key_id") ?? "", nonce: row.bytes("nonce") ?? [], ciphertext: row.bytes("ciphertext") ?? [])
    }

    private static let digits = Array("0123456789abcdef".utf8)

    /// Lower-case hex of `bytes`, for a `bytea` sent inside a text array (`decode(…, 'hex')`).
    package static func hex(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
