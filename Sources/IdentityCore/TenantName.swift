/// A tenant as the identity platform names it in an authority (`https://login.microsoftonline.com/{tenant}`,
/// "Microsoft identity platform: application configuration options, Authority"): its tenant id, a
/// GUID, or one of its verified domain names (`contoso.onmicrosoft.com`, `contoso.com`).
/// `common`, `organizations` and `consumers` name audiences, not a tenant, and are neither.
public enum TenantName {
    /// A tenant id: a GUID, `8-4-4-4-12` hexadecimal digits, either case (the `tid` claim's form).
    public static func isTenantId(_ text: String) -> Bool {
        isGUIDShaped(text)
    }

    /// Whether `text` is a GUID as it is usually written: 36 bytes, hyphens at 8, 13, 18 and 23,
    /// hexadecimal digits of either case elsewhere. Read on its bytes, without an array made.
    public static func isGUIDShaped(_ text: String) -> Bool {
        guard text.utf8.count == 36 else { return false }
        for (index, byte) in text.utf8.enumerated() {
            switch index {
            case 8, 13, 18, 23:
                guard byte == UInt8(ascii: "-") else { return false }
            default:
                guard byte.isASCIIHexDigit else { return false }
            }
        }
        return true
    }

    /// A domain name as a tenant's verified domains are (RFC 1123 §2.1): at least two labels
    /// separated by dots, each 1 to 63 letters, digits and inner hyphens, at most 253 bytes in all,
    /// the last label not all digits (no IPv4 address).
    public static func isDomainName(_ text: String) -> Bool {
        guard text.utf8.count <= 253 else { return false }
        let labels = text.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard labels.count >= 2, let last = labels.last, !last.allSatisfy(\.isASCIIDigit) else { return false }
        return labels.allSatisfy { label in
            (1...63).contains(label.count) && label.first != UInt8(ascii: "-") && label.last != UInt8(ascii: "-")
                && label.allSatisfy { $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") }
        }
    }

    /// A tenant id or a domain name.
    public static func isTenant(_ text: String) -> Bool {
        isTenantId(text) || isDomainName(text)
    }
}
