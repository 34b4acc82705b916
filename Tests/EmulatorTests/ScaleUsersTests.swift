import CryptoBridge
import Foundation
import Testing

@testable import STSEmulator

/// `--scale-users N --scale-refresh-key K` (bench/scale): a refresh token derived from a user's
/// index (as `token-relay bench-seed` stores it) is redeemable and rotates like any other; one
/// with a wrong MAC or an index out of range is not.
@Suite("Emulator scale users")
struct ScaleUsersTests {
    static let key = Array("scale-key".utf8)

    static func seeded(_ index: Int, key: [UInt8] = key) -> String {
        "scale.\(index)." + Base64URL.encode(HMACSHA256.authenticationCode(for: Array("scale-refresh|\(index)".utf8), key: key))
    }

    @Test func aSeededTokenRedeemsAsItsUserAndRotatesOnce() async throws {
        let h = try EmulatorHarness(rotationGrace: 0, scale: ScaleUsers(count: 1000, key: Self.key))
        let first = await h.refresh(Self.seeded(42))
        #expect(first.status == 200)
        let body = try #require(JSONValue.parse(first.body))
        let idToken = try #require(body["id_token"]?.stringValue)
        let claims = try TestJWT.parts(idToken).claims
        #expect(claims["preferred_username"]?.stringValue == "scale42@scale.example")
        #expect(claims["oid"]?.stringValue == "5ca1e000-0000-4000-8000-00000000002a")
        #expect(claims["tid"]?.stringValue == "11111111-1111-1111-1111-111111111111")
        // Strict rotation: the seeded token is superseded by its first redemption.
        h.clock.advance(by: 1)
        try expectEntraErrorShape(await h.refresh(Self.seeded(42)), status: 400, error: "invalid_grant", code: 70000)
        let next = try #require(body["refresh_token"]?.stringValue)
        #expect(await h.refresh(next).status == 200)
    }

    @Test func everyHundredthUserIsInTheSecondTenant() async throws {
        let h = try EmulatorHarness(scale: ScaleUsers(count: 1000, key: Self.key))
        let answer = await h.refresh(Self.seeded(99), tenant: "22222222-2222-2222-2222-222222222222")
        #expect(answer.status == 200)
        let idToken = try #require(JSONValue.parse(answer.body)?["id_token"]?.stringValue)
        #expect(try TestJWT.parts(idToken).claims["tid"]?.stringValue == "22222222-2222-2222-2222-222222222222")
    }

    @Test func aWrongMacOrAnIndexOutOfRangeIsInvalidGrant() async throws {
        let h = try EmulatorHarness(scale: ScaleUsers(count: 1000, key: Self.key))
        try expectEntraErrorShape(await h.refresh(Self.seeded(7, key: Array("other".utf8))), status: 400, error: "invalid_grant", code: 9002313)
        try expectEntraErrorShape(await h.refresh(Self.seeded(1000)), status: 400, error: "invalid_grant", code: 9002313)
    }
}
