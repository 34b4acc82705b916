import HTTPCommon
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore

/// `/v1/downstream-encoded/{api}/{path}` (issue 29 item 2, behaviour §6.2): the path a generated
/// client sends as one percent-encoded parameter, decoded once into the path that
/// `/v1/downstream/{api}/{path}` takes as sent. Inputs are as the server hands the remainder
/// over (`%2F`, `%25` and `%00` still encoded, every other escape decoded).
@Suite("Downstream path decoded once")
struct DownstreamEncodedPathTests {
    @Test(
        "A multi-segment path, an encoded / inside a segment, other escapes, unencoded slashes and dot segments decode to the relay's own form",
        arguments: [
            ("me", "me"),
            ("me%2Fmessages", "me/messages"),
            ("me/messages", "me/messages"),
            ("users%2Fa%252Fb", "users/a%2Fb"),
            ("users%2Falice@contoso.example%252Fx", "users/alice@contoso.example%2Fx"),
            ("users%2Fa%2540b", "users/a@b"),
            ("me%2Fmessages%2F%2541%2542", "me/messages/AB"),
            ("x%2500", "x%00"),
            ("..%2F..%2Fetc", "../../etc"),
            ("a%252Fb%2Fc", "a%2Fb/c"),
            ("100%25", "100%"),
        ])
    func decodedOnce(_ sent: String, _ relayed: String) {
        #expect(DownstreamRoutes.decodedOnce(sent) == relayed)
    }

    @Test("The server's own decoding keeps %2F, %25 and %00 and leaves a broken escape as it is")
    func serverDecodedPath() {
        #expect(HTTPRequest.serverDecodedPath("a%2Fb%25c%00d%41%zz%4") == "a%2Fb%25c%00dA%zz%4")
        #expect(HTTPRequest.serverDecodedPath("plain/path") == "plain/path")
    }
}
