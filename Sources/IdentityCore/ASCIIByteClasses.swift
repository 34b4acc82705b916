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
}
