internal import CPKCS11

/// A `CK_ATTRIBUTE` array whose values live as long as the template (PKCS#11 v2.40 §4.1):
/// the values are copied into memory the template owns and frees.
final class AttributeTemplate {
    private(set) var attributes: [CK_ATTRIBUTE] = []
    private var storage: [UnsafeMutableRawBufferPointer] = []

    deinit {
        for buffer in storage { buffer.deallocate() }
    }

    func add(_ type: UInt, bytes: [UInt8]) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 8)
        buffer.copyBytes(from: bytes)
        storage.append(buffer)
        attributes.append(CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(type), pValue: buffer.baseAddress, ulValueLen: CK_ULONG(bytes.count)))
    }

    func add(_ type: UInt, ulong value: CK_ULONG) {
        withUnsafeBytes(of: value) { add(type, bytes: Array($0)) }
    }

    func add(_ type: UInt, bool value: Bool) {
        add(type, bytes: [value ? 1 : 0])
    }

    /// Calls `body` with the array and its count, as the C functions take them.
    func withAttributes<R>(_ body: (UnsafeMutablePointer<CK_ATTRIBUTE>?, CK_ULONG) -> R) -> R {
        attributes.withUnsafeMutableBufferPointer { body($0.baseAddress, CK_ULONG($0.count)) }
    }
}
