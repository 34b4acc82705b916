internal import CPKCS11
import Synchronization

/// A PKCS#11 module (an HSM's client library, SoftHSM2) loaded with `dlopen` and initialised once
/// per process (PKCS#11 v2.40 §5.4 `C_Initialize`, with `CKF_OS_LOCKING_OK`: the module locks
/// for itself, so its functions may be called from any thread).
///
/// A module is never finalised: `C_Finalize` would close every session of the process, and a
/// process loads its HSM once. ``load(path:)`` hands out the same instance for the same path.
public final class PKCS11Module: @unchecked Sendable {
    // @unchecked: `functions` is the module's own table, read-only once C_GetFunctionList has
    // filled it; the module was initialised for OS locking (see above).
    let functions: UnsafeMutablePointer<CK_FUNCTION_LIST>
    /// The module's file path, as given.
    public let path: String
    /// Held by a session while it creates, searches or destroys token objects. SoftHSM2 2.6
    /// (Debian 12) rereads every object of the token in `C_FindObjectsInit`, with file locks that
    /// do not exclude threads of one process: a key another session is writing reads as empty or
    /// cut short, is marked invalid, and that `C_GenerateKey` fails with `CKR_GENERAL_ERROR` or
    /// `CKR_TEMPLATE_INCONSISTENT` (SoftHSMv2 issue 573, fixed in 2.7.0). Sealing and opening do
    /// not take it: they reread only their own key, which no other session writes.
    let objectStoreTurn = Mutex<Void>(())

    private static let loaded = Mutex<[String: PKCS11Module]>([:])

    private init(path: String, functions: UnsafeMutablePointer<CK_FUNCTION_LIST>) {
        self.path = path
        self.functions = functions
    }

    /// Loads and initialises the module at `path`, or returns the one already loaded from it.
    /// - Throws: ``PKCS11Error`` naming `dlopen` (with dlerror()'s text) when the file is missing
    ///   or not a shared library, `dlsym` when it has no `C_GetFunctionList`, or the failing
    ///   `C_GetFunctionList` / `C_Initialize` with its `CKR_*` code.
    public static func load(path: String) throws(PKCS11Error) -> PKCS11Module {
        try loaded.withLock { (modules: inout [String: PKCS11Module]) throws(PKCS11Error) -> PKCS11Module in
            if let module = modules[path] { return module }
            let module = try open(path)
            modules[path] = module
            return module
        }
    }

    private static func open(_ path: String) throws(PKCS11Error) -> PKCS11Module {
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            throw PKCS11Error("dlopen", code: 0, reason: dlerror().map { String(cString: $0) } ?? path)
        }
        guard let symbol = dlsym(handle, "C_GetFunctionList") else {
            dlclose(handle)
            throw PKCS11Error("dlsym", code: 0, reason: "\(path) has no C_GetFunctionList")
        }
        var list: UnsafeMutablePointer<CK_FUNCTION_LIST>?
        try check(tokenrelay_pkcs11_get_function_list(symbol, &list), "C_GetFunctionList")
        guard let list, let initialize = list.pointee.C_Initialize else {
            throw PKCS11Error("C_GetFunctionList", code: 0, reason: "no function list")
        }
        var arguments = CK_C_INITIALIZE_ARGS()
        arguments.flags = CK_FLAGS(CKF_OS_LOCKING_OK)
        let result = withUnsafeMutablePointer(to: &arguments) { initialize(UnsafeMutableRawPointer($0)) }
        // Another part of the process (a second TokenRelay component, a test) initialised it first.
        if result != CK_RV(CKR_CRYPTOKI_ALREADY_INITIALIZED) { try check(result, "C_Initialize") }
        return PKCS11Module(path: path, functions: list)
    }

    /// The labels of the initialised tokens in the module's slots (blank padding removed).
    /// - Throws: ``PKCS11Error`` from `C_GetSlotList` or `C_GetTokenInfo`.
    public func tokenLabels() throws(PKCS11Error) -> [String] {
        try tokens().map(\.label)
    }

    /// Opens a read-write session on the token labelled `tokenLabel` and logs the user in with `pin`.
    /// Login state belongs to the token and the process (PKCS#11 v2.40 §5.6): when another
    /// session of this process is logged in already, the PIN is not checked again.
    /// - Throws: ``PKCS11Error`` from `C_OpenSession` or `C_Login` (`CKR_PIN_INCORRECT`: see
    ///   ``PKCS11Error/isPINRefused``), or naming `C_GetTokenInfo` when no slot holds a token of
    ///   that label (the labels found are in the reason).
    public func openSession(tokenLabel: String, pin: String) throws(PKCS11Error) -> PKCS11Session {
        let found = try tokens()
        guard let slot = found.first(where: { $0.label == tokenLabel })?.slot else {
            throw PKCS11Error(
                "C_GetTokenInfo", code: 0,
                reason: "no token labelled '\(tokenLabel)' (found: \(found.map { "'\($0.label)'" }.joined(separator: ", ")))")
        }
        var session = CK_SESSION_HANDLE(0)
        try check(functions.pointee.C_OpenSession!(slot, CK_FLAGS(CKF_SERIAL_SESSION | CKF_RW_SESSION), nil, nil, &session), "C_OpenSession")
        var pinBytes = Array(pin.utf8)
        let login = pinBytes.withUnsafeMutableBufferPointer { functions.pointee.C_Login!(session, CK_USER_TYPE(CKU_USER), $0.baseAddress, CK_ULONG($0.count)) }
        // Sessions of one application share the login state: a second session is already in.
        if login != CK_RV(CKR_USER_ALREADY_LOGGED_IN) && login != CK_RV(CKR_OK) {
            _ = functions.pointee.C_CloseSession!(session)
            throw PKCS11Error("C_Login", code: UInt(login))
        }
        return PKCS11Session(module: self, handle: session)
    }

    private func tokens() throws(PKCS11Error) -> [(slot: CK_SLOT_ID, label: String)] {
        var count = CK_ULONG(0)
        try check(functions.pointee.C_GetSlotList!(CK_BBOOL(1), nil, &count), "C_GetSlotList")
        var slots = [CK_SLOT_ID](repeating: 0, count: Int(count))
        try check(slots.withUnsafeMutableBufferPointer { functions.pointee.C_GetSlotList!(CK_BBOOL(1), $0.baseAddress, &count) }, "C_GetSlotList")
        var found: [(slot: CK_SLOT_ID, label: String)] = []
        for slot in slots.prefix(Int(count)) {
            var info = CK_TOKEN_INFO()
            try check(functions.pointee.C_GetTokenInfo!(slot, &info), "C_GetTokenInfo")
            guard info.flags & CK_FLAGS(CKF_TOKEN_INITIALIZED) != 0 else { continue }
            let label = withUnsafeBytes(of: info.label) { String(decoding: $0, as: UTF8.self) }
            found.append((slot, String(label.reversed().drop { $0 == " " || $0 == "\0" }.reversed())))
        }
        return found
    }
}
