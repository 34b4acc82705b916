import IdentityCore
import Testing

@Suite("ABNF byte classes")
struct ASCIIByteClassesTests {
    @Test("tchar (RFC 9110 §5.6.2) is exactly the letters, digits and !#$%&'*+-.^_`|~, for every byte")
    func tokenCharacters() {
        let tchar = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        for byte in UInt8.min...UInt8.max {
            #expect(byte.isHTTPTokenCharacter == tchar.contains(byte), "byte \(byte)")
        }
    }
}
