import Foundation
import IdentityCore
import Testing
import TokenRelayTesting

@testable import TokenRelayApp

/// `TOKENRELAY_MEMORY_CACHE_MB` bounds resident memory only if each entry's counted cost is what
/// it really allocates (issue 13). These fill the caches with entries shaped like real ones and
/// compare the heap's growth (glibc's own count of bytes handed out) with the bytes counted.
@Suite("Memory caches count what their entries really allocate", .serialized)
struct MemoryAccountingTests {
    /// Enough entries (about 50 MB each way) that what tests running beside this one allocate
    /// meanwhile is lost in the noise.
    static let count = 20_000

    /// A base64url run of `length` characters, distinct per `seed`, like a JWT's parts; its
    /// buffer exactly fits (as a string decoded from a database row or a JSON answer does).
    static func base64url(_ length: Int, seed: Int) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var state = UInt64(truncatingIfNeeded: seed) &* 0x9E37_79B9_7F4A_7C15 | 1
        let bytes = (0..<length).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return alphabet[Int(state % 64)]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func uuid(_ index: Int, _ salt: Int) -> String {
        func hex(_ value: Int, _ width: Int) -> String {
            let digits = String(value, radix: 16)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        let digits = Array(hex(index, 8) + hex(salt, 4) + hex(index &* 7919 &+ salt, 20))
        return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(digits[$0]) }.joined(separator: "-")
    }

    static func accountId(_ index: Int) -> String {
        let digits = String(index)
        return "acc_scale_" + String(repeating: "0", count: max(0, 10 - digits.count)) + digits
    }

    /// An access token as the STS issues one for Graph (about 1.4 KB), for account `index`.
    static func token(_ index: Int) -> StoredAccessToken {
        // Decoded in one piece, as from the STS's JSON: a string built by appending has spare capacity.
        let secret = String(
            decoding: Array(("eyJ0eXAiOiJKV1QiLCJub25jZSI6" + base64url(1_100, seed: index) + "." + base64url(342, seed: index + 1)).utf8), as: UTF8.self)
        return StoredAccessToken(
            accountId: Self.accountId(index), environment: "login.microsoftonline.com", realm: uuid(index % 100, 1),
            clientId: "6731de76-14a6-49ae-97bc-6eba6914391e", scopes: ["https://graph.microsoft.com/User.Read", "https://graph.microsoft.com/Mail.Read"],
            secret: secret, expiresOn: 9_000, extExpiresOn: 12_000, refreshOn: 6_000)
    }

    /// An account as a sign-in stores it: the id token's claims (about 700 bytes), one profile.
    static func account(_ index: Int) -> AccountRecord {
        let realm = uuid(index % 100, 1)
        let oid = uuid(index, 2)
        let claims = """
            {"aud":"6731de76-14a6-49ae-97bc-6eba6914391e","iss":"https://login.microsoftonline.com/\(realm)/v2.0","iat":1796300000,\
            "nbf":1796300000,"exp":1796303600,"aio":"\(base64url(120, seed: index + 2_000_000))","name":"Scale User \(index)",\
            "nonce":"\(base64url(22, seed: index + 3_000_000))","oid":"\(oid)","preferred_username":"user\(index)@contoso.example",\
            "rh":"\(base64url(60, seed: index + 4_000_000))","sid":"\(uuid(index, 3))","sub":"\(base64url(43, seed: index + 5_000_000))",\
            "tid":"\(realm)","uti":"\(base64url(22, seed: index + 6_000_000))","ver":"2.0"}
            """
        return AccountRecord(
            accountId: Self.accountId(index), clientId: "6731de76-14a6-49ae-97bc-6eba6914391e",
            environment: "login.microsoftonline.com", homeAccountId: "\(oid).\(realm)", realm: realm, localAccountId: oid,
            username: "user\(index)@contoso.example", name: "Scale User \(index)", authority: "https://login.microsoftonline.com/\(realm)",
            authorityType: .aad, state: .active, idTokenClaims: claims, createdAt: "2026-11-29T00:00:00.000000Z",
            lastUsedAt: "2026-12-01T10:00:00.000000Z")
    }

    /// Heap growth over bytes counted for `count` entries stored in a new cache, the least of
    /// two fills: the heap count is process-wide, and suites running beside this one can only
    /// add to a fill's apparent growth (by about 0.1 in a whole `swift test` run).
    static func ratio(_ fill: () -> (counted: Int, entries: Int, cache: AnyObject)) -> Double {
        var ratios: [Double] = []
        for _ in 0..<2 {
            let before = HeapBytes.inUse
            let (counted, entries, cache) = fill()
            let grown = withExtendedLifetime(cache) { HeapBytes.inUse - before }
            #expect(entries == count)
            print("memory accounting: \(count) entries, heap grew \(grown) bytes, counted \(counted), ratio \(Double(grown) / Double(counted))")
            ratios.append(Double(grown) / Double(counted))
        }
        return ratios.min()!
    }

    @Test("Access tokens: the heap grows by the bytes counted, within 15 %")
    func tokens() {
        let ratio = Self.ratio {
            let cache = MemoryTokenCache(capacityBytes: 1 << 30)
            for index in 0..<Self.count { cache.store(Self.token(index), now: 500) }
            return (cache.usage.bytes, cache.usage.entries, cache)
        }
        #expect((0.85...1.15).contains(ratio), "heap growth / counted bytes = \(ratio)")
    }

    @Test("Accounts: the heap grows by the bytes counted, within 15 %")
    func accounts() {
        let ratio = Self.ratio {
            let cache = AccountCache(ttl: 3600, capacityBytes: 1 << 30)
            let mark = cache.readMark
            for index in 0..<Self.count { cache.store(Self.account(index), readMark: mark) }
            return (cache.usage.bytes, cache.usage.entries, cache)
        }
        #expect((0.85...1.15).contains(ratio), "heap growth / counted bytes = \(ratio)")
    }
}
