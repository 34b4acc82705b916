extension UInt8 {
    /// tchar of RFC 9110 §5.6.2, the bytes of a token (a field name): VCHAR except the delimiters
    /// `"(),/:;<=>?@[\]{}`.
    @inlinable
    public var isHTTPTokenCharacter: Bool {
        // One bit per ASCII byte (checked for every byte of every header name of every request):
        // below 64 `!#$%&'*+-.` and the digits; from 64 the letters, `^_`, `` ` `` and `|~`.
        self < 64 ? (0x03FF_6CFA_0000_0000 as UInt64) >> self & 1 == 1 : self < 128 && (0x57FF_FFFF_C7FF_FFFE as UInt64) >> (self - 64) & 1 == 1
    }
}

/// What the server learnt about a request's header fields while it read them off the wire, so
/// that rules over every field (``HTTPRequest/fieldFacts``) need no second pass over Strings.
public struct HeaderFieldFacts: Sendable, Equatable {
    /// Every field name is a non-empty token (RFC 9110 §5.6.2).
    public var namesAreTokens = true
    /// How many `Host` fields the request has.
    public var hostFields = 0
    /// How many `Content-Length` fields the request has.
    public var contentLengthFields = 0
    /// Bytes of the header section as sent (``HTTPRequest/headerFieldBytes``).
    public var headerFieldBytes = 0

    public init() {}

    /// Counts one field of `name` (`nameCount` bytes, read as `isHost`/`isContentLength` by the
    /// caller) whose value is `valueCount` bytes.
    /// `knownToken`: the caller already knows `name` is a token (a well-known field name).
    public mutating func count(name: UnsafeRawBufferPointer, isHost: Bool, isContentLength: Bool, valueCount: Int, knownToken: Bool = false) {
        if namesAreTokens && !knownToken {
            var allTokenBytes = !name.isEmpty
            for byte in name where !byte.isHTTPTokenCharacter { allTokenBytes = false }
            namesAreTokens = allTokenBytes
        }
        if isHost { hostFields += 1 }
        if isContentLength { contentLengthFields += 1 }
        headerFieldBytes += name.count + valueCount + 4
    }
}
