import CryptoBridge
import Foundation
import TokenRelayBase

public struct KeyRingError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// The encryption key ring (behaviour §7, §11): `id1:base64key,id2:base64key`. The first key encrypts;
/// every key decrypts, so rotation is `[new, old]` then `token-relay encryption rotate`.
public struct KeyRing: Sendable {
    public struct Key: Sendable {
        public let id: String
        package let bytes: [UInt8]
    }

    public let keys: [Key]

    /// - Throws: `KeyRingError` when the ring is empty, an id repeats or is not `[A-Za-z0-9_-]{1,32}`,
    ///   or a key is not 32 bytes of standard or URL-safe base64. The message never holds key bytes.
    public init(parsing text: String) throws(KeyRingError) {
        var keys: [Key] = []
        for entry in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !entry.isEmpty {
            guard let colon = entry.firstIndex(of: ":") else {
                throw KeyRingError(description: "each entry must be id:base64key")
            }
            let id = String(entry[..<colon])
            guard Self.isKeyId(id) else { throw KeyRingError(description: Self.keyIdRule) }
            guard !keys.contains(where: { $0.id == id }) else {
                throw KeyRingError(description: "key id '\(id)' appears twice")
            }
            let encoded = String(entry[entry.index(after: colon)...])
            guard let bytes = Self.decodeBase64(encoded), bytes.count == 32 else {
                throw KeyRingError(description: "key '\(id)' must be 32 bytes, base64-encoded")
            }
            keys.append(Key(id: id, bytes: bytes))
        }
        guard !keys.isEmpty else { throw KeyRingError(description: "at least one key is required") }
        self.keys = keys
    }

    /// What a key id must be, as the errors say it.
    public static let keyIdRule = "key id must be 1-32 characters of [A-Za-z0-9_-]"

    /// Whether `id` may name a ring key: 1-32 characters of `[A-Za-z0-9_-]` (it is stored beside
    /// each ciphertext, and `,` and `:` separate the ring's entries).
    public static func isKeyId(_ id: String) -> Bool {
        !id.isEmpty && id.count <= 32 && id.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
    }

    /// The key that encrypts.
    public var primary: Key { keys[0] }

    public func key(id: String) -> Key? { keys.first { $0.id == id } }

    /// A new random key ring entry, `id:base64key`, for development set-up; `id` is one
    /// ``isKeyId(_:)`` accepts (the caller checks it).
    public static func generateEntry(id: String) -> String {
        "\(id):" + Data(SecureRandom.bytes(32)).base64EncodedString()
    }

    private static func decodeBase64(_ text: String) -> [UInt8]? {
        if let data = Data(base64Encoded: text) { return Array(data) }
        return Base64URL.decode(text)
    }
}
