internal import COpenSSL

/// A failure inside OpenSSL's libcrypto, or input the crypto bridge refuses.
///
/// `description` names the OpenSSL function and OpenSSL's reason text; it never contains key
/// material, plaintext or signatures.
public struct CryptoError: Error, CustomStringConvertible, Sendable {
    /// A bounded code, usable as a metric label.
    public enum Kind: String, Sendable {
        /// The caller passed a key, nonce or buffer of the wrong shape.
        case invalidInput
        /// An AEAD tag did not verify: wrong key, nonce or associated data, or tampered bytes.
        case authenticationFailed
        /// An OpenSSL call failed for another reason (allocation, malformed PEM, ...).
        case library
    }

    public let kind: Kind
    /// The OpenSSL function that failed, e.g. `EVP_DecryptFinal_ex`, or the bridge entry point.
    public let function: String
    /// OpenSSL's error-queue text or the bridge's explanation.
    public let reason: String

    init(_ kind: Kind, function: String, reason: String) {
        self.kind = kind
        self.function = function
        self.reason = reason
    }

    public var description: String { "CryptoError.\(kind.rawValue) in \(function): \(reason)" }

    /// An error for the failed `function`, taking (and clearing) the thread's OpenSSL error queue.
    static func openSSL(_ function: String, kind: Kind = .library) -> CryptoError {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return CryptoError(kind, function: function, reason: "failed") }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return CryptoError(kind, function: function, reason: text)
    }

    static func invalidInput(_ function: String, _ reason: String) -> CryptoError {
        CryptoError(.invalidInput, function: function, reason: reason)
    }
}

/// The one place that turns libcrypto's "1 on success" convention into a thrown `CryptoError`.
@inline(__always)
func checkOpenSSL(_ result: Int32, _ function: String, kind: CryptoError.Kind = .library) throws(CryptoError) {
    guard result == 1 else { throw CryptoError.openSSL(function, kind: kind) }
}
