internal import CPKCS11

/// A failure of a PKCS#11 call, or of loading the module.
///
/// `description` names the PKCS#11 function and its `CKR_*` return value (PKCS#11 v2.40 §11.1);
/// it never contains a PIN or key material.
public struct PKCS11Error: Error, CustomStringConvertible, Sendable, Equatable {
    /// The function that failed: `C_Login`, `C_Decrypt`, ... or `dlopen` / `dlsym` when the
    /// module could not be loaded, or the bridge's own entry point.
    public let function: String
    /// The `CK_RV` it returned; 0 (`CKR_OK`) for failures that have none (dlopen, a token label
    /// no slot carries).
    public let code: UInt
    /// What went wrong beyond the code: dlerror()'s text, the label looked for.
    public let reason: String

    init(_ function: String, code: UInt, reason: String = "") {
        self.function = function
        self.code = code
        self.reason = reason
    }

    /// `CKR_PIN_INCORRECT`, `CKR_DEVICE_REMOVED`, ... or the hexadecimal value of a code without a name here.
    public var codeName: String { Self.names[code] ?? "CKR_0x" + String(code, radix: 16) }

    /// True when the token refused the PIN (wrong, locked or expired): retrying cannot help.
    public var isPINRefused: Bool {
        [UInt(CKR_PIN_INCORRECT), UInt(CKR_PIN_LOCKED), UInt(CKR_PIN_EXPIRED), UInt(CKR_PIN_INVALID), UInt(CKR_PIN_LEN_RANGE)].contains(code)
    }

    /// True when `C_Decrypt` refused the ciphertext: its tag did not verify (wrong key, wrong
    /// associated data, tampered bytes). PKCS#11 v2.40 names `CKR_ENCRYPTED_DATA_INVALID`;
    /// SoftHSM2 2.6 answers a GCM tag mismatch with `CKR_GENERAL_ERROR`, so that counts here too.
    public var isAuthenticationFailure: Bool {
        function == "C_Decrypt"
            && [UInt(CKR_ENCRYPTED_DATA_INVALID), UInt(CKR_ENCRYPTED_DATA_LEN_RANGE), UInt(CKR_GENERAL_ERROR), UInt(CKR_FUNCTION_FAILED)].contains(code)
    }

    public var description: String {
        let what = code == 0 ? "failed" : "returned \(codeName)"
        return reason.isEmpty ? "PKCS#11 \(function) \(what)" : "PKCS#11 \(function) \(what): \(reason)"
    }

    private static let names: [UInt: String] = [
        UInt(CKR_OK): "CKR_OK",
        UInt(CKR_CANCEL): "CKR_CANCEL",
        UInt(CKR_HOST_MEMORY): "CKR_HOST_MEMORY",
        UInt(CKR_SLOT_ID_INVALID): "CKR_SLOT_ID_INVALID",
        UInt(CKR_GENERAL_ERROR): "CKR_GENERAL_ERROR",
        UInt(CKR_FUNCTION_FAILED): "CKR_FUNCTION_FAILED",
        UInt(CKR_ARGUMENTS_BAD): "CKR_ARGUMENTS_BAD",
        UInt(CKR_ATTRIBUTE_VALUE_INVALID): "CKR_ATTRIBUTE_VALUE_INVALID",
        UInt(CKR_DATA_LEN_RANGE): "CKR_DATA_LEN_RANGE",
        UInt(CKR_DEVICE_ERROR): "CKR_DEVICE_ERROR",
        UInt(CKR_DEVICE_MEMORY): "CKR_DEVICE_MEMORY",
        UInt(CKR_DEVICE_REMOVED): "CKR_DEVICE_REMOVED",
        UInt(CKR_ENCRYPTED_DATA_INVALID): "CKR_ENCRYPTED_DATA_INVALID",
        UInt(CKR_ENCRYPTED_DATA_LEN_RANGE): "CKR_ENCRYPTED_DATA_LEN_RANGE",
        UInt(CKR_KEY_HANDLE_INVALID): "CKR_KEY_HANDLE_INVALID",
        UInt(CKR_KEY_TYPE_INCONSISTENT): "CKR_KEY_TYPE_INCONSISTENT",
        UInt(CKR_KEY_FUNCTION_NOT_PERMITTED): "CKR_KEY_FUNCTION_NOT_PERMITTED",
        UInt(CKR_MECHANISM_INVALID): "CKR_MECHANISM_INVALID",
        UInt(CKR_MECHANISM_PARAM_INVALID): "CKR_MECHANISM_PARAM_INVALID",
        UInt(CKR_OBJECT_HANDLE_INVALID): "CKR_OBJECT_HANDLE_INVALID",
        UInt(CKR_OPERATION_ACTIVE): "CKR_OPERATION_ACTIVE",
        UInt(CKR_PIN_INCORRECT): "CKR_PIN_INCORRECT",
        UInt(CKR_PIN_INVALID): "CKR_PIN_INVALID",
        UInt(CKR_PIN_LEN_RANGE): "CKR_PIN_LEN_RANGE",
        UInt(CKR_PIN_EXPIRED): "CKR_PIN_EXPIRED",
        UInt(CKR_PIN_LOCKED): "CKR_PIN_LOCKED",
        UInt(CKR_SESSION_CLOSED): "CKR_SESSION_CLOSED",
        UInt(CKR_SESSION_HANDLE_INVALID): "CKR_SESSION_HANDLE_INVALID",
        UInt(CKR_TEMPLATE_INCOMPLETE): "CKR_TEMPLATE_INCOMPLETE",
        UInt(CKR_TEMPLATE_INCONSISTENT): "CKR_TEMPLATE_INCONSISTENT",
        UInt(CKR_TOKEN_NOT_PRESENT): "CKR_TOKEN_NOT_PRESENT",
        UInt(CKR_TOKEN_NOT_RECOGNIZED): "CKR_TOKEN_NOT_RECOGNIZED",
        UInt(CKR_USER_ALREADY_LOGGED_IN): "CKR_USER_ALREADY_LOGGED_IN",
        UInt(CKR_USER_NOT_LOGGED_IN): "CKR_USER_NOT_LOGGED_IN",
        UInt(CKR_USER_PIN_NOT_INITIALIZED): "CKR_USER_PIN_NOT_INITIALIZED",
        UInt(CKR_BUFFER_TOO_SMALL): "CKR_BUFFER_TOO_SMALL",
        UInt(CKR_CRYPTOKI_NOT_INITIALIZED): "CKR_CRYPTOKI_NOT_INITIALIZED",
        UInt(CKR_CRYPTOKI_ALREADY_INITIALIZED): "CKR_CRYPTOKI_ALREADY_INITIALIZED",
    ]
}

/// The one place that turns a `CK_RV` other than `CKR_OK` into a thrown ``PKCS11Error``.
@inline(__always)
func check(_ result: CK_RV, _ function: String) throws(PKCS11Error) {
    guard result == CK_RV(CKR_OK) else { throw PKCS11Error(function, code: UInt(result)) }
}
