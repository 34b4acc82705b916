import PKCS11Bridge
import TokenRelayBase

/// Opens the key-encryption keys of `TOKENRELAY_PKCS11_*` (ADR 0016, 0017): loads the module, logs
/// in to the token and finds each key label. Any failure names the setting to fix; none holds
/// the PIN.
package enum HSMKeys {
    /// - Returns: one key per label, in the settings' order (the first wraps).
    /// - Throws: `ConfigurationError` naming `TOKENRELAY_PKCS11_MODULE` (not loadable),
    ///   `_TOKEN_LABEL` (no such token), `_PIN` (refused) or `_KEY_LABEL` (no such AES key;
    ///   `token-relay encryption create-kek` makes one).
    package static func open(_ settings: Configuration.Encryption.PKCS11) throws -> [KeyEncryptionKey] {
        let session = try openSession(settings)
        return try settings.keyLabels.map { label in
            let key: PKCS11Key?
            do { key = try session.findAESKey(label: label) } catch {
                throw ConfigurationError(setting: "TOKENRELAY_PKCS11_KEY_LABEL", reason: "looking for '\(label)' failed: \(error)")
            }
            guard let key else {
                throw ConfigurationError(
                    setting: "TOKENRELAY_PKCS11_KEY_LABEL",
                    reason: "no AES key labelled '\(label)' on token '\(settings.tokenLabel)' (token-relay encryption create-kek makes one)")
            }
            return KeyEncryptionKey(session: session, key: key)
        }
    }

    /// A logged-in session on the configured token.
    package static func openSession(_ settings: Configuration.Encryption.PKCS11) throws -> PKCS11Session {
        let module: PKCS11Module
        do { module = try PKCS11Module.load(path: settings.module) } catch {
            throw ConfigurationError(setting: "TOKENRELAY_PKCS11_MODULE", reason: "cannot load \(settings.module): \(error)")
        }
        do {
            return try module.openSession(tokenLabel: settings.tokenLabel, pin: settings.pin)
        } catch  where error.isPINRefused {
            throw ConfigurationError(setting: "TOKENRELAY_PKCS11_PIN", reason: "the token '\(settings.tokenLabel)' refused the PIN (\(error.codeName))")
        } catch  where error.function == "C_GetTokenInfo" && error.code == 0 {
            throw ConfigurationError(setting: "TOKENRELAY_PKCS11_TOKEN_LABEL", reason: error.reason)
        } catch {
            throw ConfigurationError(setting: "TOKENRELAY_PKCS11_MODULE", reason: "cannot open a session on token '\(settings.tokenLabel)': \(error)")
        }
    }

    /// Generates the first label's AES key on the token unless it exists (`token-relay encryption create-kek`).
    /// - Returns: whether a key was made.
    package static func createPrimary(_ settings: Configuration.Encryption.PKCS11) throws -> Bool {
        let session = try openSession(settings)
        let label = settings.keyLabels[0]
        if try session.findAESKey(label: label) != nil { return false }
        _ = try session.generateAESKey(label: label)
        return true
    }
}
