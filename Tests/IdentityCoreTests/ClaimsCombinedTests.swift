import Testing

@testable import IdentityCore

/// `ClaimsRequest.combined`: a challenge merged into the caller's claims request, member by
/// member, the challenge winning where both name a claim (identity platform "Claims challenges,
/// claims requests, and client capabilities"; OpenID Connect Core §5.5).
@Suite("A claims challenge combined with the caller's claims request")
struct ClaimsCombinedTests {
    @Test("Both merge per member; the challenge wins on the same claim; encodings are read; nothing gives nil")
    func combines() {
        let caller = #"{"access_token":{"nbf":{"essential":true,"value":"1"},"xms_cc":{"values":["cp1"]}}}"#
        let challenge = #"{"access_token":{"nbf":{"essential":true,"value":"2"},"acrs":{"essential":true,"value":"c1"}}}"#
        #expect(
            ClaimsRequest.combined(caller, challenge: challenge)
                == #"{"access_token":{"acrs":{"essential":true,"value":"c1"},"nbf":{"essential":true,"value":"2"},"xms_cc":{"values":["cp1"]}}}"#)
        let base64 = "eyJhY2Nlc3NfdG9rZW4iOnsibmJmIjp7ImVzc2VudGlhbCI6dHJ1ZSwgInZhbHVlIjoiMTY1NzgzNDQxNyJ9fX0="
        #expect(ClaimsRequest.combined(nil, challenge: base64) == #"{"access_token":{"nbf":{"essential":true,"value":"1657834417"}}}"#)
        #expect(ClaimsRequest.combined(challenge, challenge: nil) == ClaimsRequest.combined(nil, challenge: challenge))
        #expect(ClaimsRequest.combined("not json", challenge: challenge) == ClaimsRequest.combined(nil, challenge: challenge))
        #expect(ClaimsRequest.combined(nil, challenge: nil) == nil)
        #expect(ClaimsRequest.combined(" ", challenge: "") == nil)
    }
}
