import HTTPCommon
import Testing

@Suite("HTTP tokens and header field facts")
struct HTTPTokenTests {
    @Test("tchar (RFC 9110 §5.6.2) is exactly the letters, digits and !#$%&'*+-.^_`|~, for every byte")
    func tokenCharacters() {
        let tchar = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        for byte in UInt8.min...UInt8.max {
            #expect(byte.isHTTPTokenCharacter == tchar.contains(byte), "byte \(byte)")
        }
    }

    @Test("the facts counted per field: token names, Host and Content-Length fields, the section's bytes as sent")
    func fieldFacts() {
        var facts = HeaderFieldFacts()
        for (name, value, isHost, isLength) in [("Host", "a", true, false), ("Content-Length", "2", false, true), ("X-Y", "zz", false, false)] {
            Array(name.utf8).withUnsafeBytes { facts.count(name: $0, isHost: isHost, isContentLength: isLength, valueCount: value.utf8.count) }
        }
        #expect(facts.namesAreTokens && facts.hostFields == 1 && facts.contentLengthFields == 1)
        #expect(facts.headerFieldBytes == (4 + 1 + 4) + (14 + 1 + 4) + (3 + 2 + 4))
        Array("Bad Name".utf8).withUnsafeBytes { facts.count(name: $0, isHost: false, isContentLength: false, valueCount: 0) }
        #expect(!facts.namesAreTokens)
        var empty = HeaderFieldFacts()
        empty.count(name: UnsafeRawBufferPointer(start: nil, count: 0), isHost: false, isContentLength: false, valueCount: 1)
        #expect(!empty.namesAreTokens, "an empty name is no token")
    }
}
