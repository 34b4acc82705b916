/// The byte classes the protocols' ABNF grammars are written in (RFC 5234 Appendix B.1), for
/// checking UTF-8 bytes of request fields without building `Character`s.
extension UInt8 {
    /// ALPHA: `A`–`Z`, `a`–`z`.
    public var isASCIILetter: Bool { (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self) }
    /// DIGIT: `0`–`9`.
    public var isASCIIDigit: Bool { (0x30...0x39).contains(self) }
    /// ALPHA / DIGIT.
    public var isASCIIAlphanumeric: Bool { isASCIILetter || isASCIIDigit }
    /// HEXDIG, either case.
    public var isASCIIHexDigit: Bool { isASCIIDigit || (0x41...0x46).contains(self) || (0x61...0x66).contains(self) }
    /// VCHAR: a visible (printing) character, `%x21-7E`.
    public var isASCIIVisible: Bool { (0x21...0x7E).contains(self) }
    /// tchar of RFC 9110 §5.6.2, the bytes of a token (a field name): VCHAR except the delimiters
    /// `"(),/:;<=>?@[\]{}`.
    @inlinable
    public var isHTTPTokenCharacter: Bool {
        // One bit per ASCII byte (checked for every byte of every header name of every request):
        // below 64 `!#$%&'*+-.` and the digits; from 64 the letters, `^_`, `` ` `` and `|~`.
        self < 64 ? (0x03FF_6CFA_0000_0000 as UInt64) >> self & 1 == 1 : self < 128 && (0x57FF_FFFF_C7FF_FFFE as UInt64) >> (self - 64) & 1 == 1
    }
}
