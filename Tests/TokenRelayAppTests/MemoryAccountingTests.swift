import Foundation
import IdentityCore
import Testing
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayDownstream
import TokenRelayHTTP
import TokenRelayServer
import TokenRelaySignIn
import TokenRelayStore
import TokenRelayTesting

/// `TOKENRELAY_MEMORY_CACHE_MB` bounds resident memory only if each entry's counted cost is what
/// it really allocates (issue 13). These fill the caches with entries shaped like real ones and
/// compare the heap's growth (glibc's own count of bytes handed out) with the bytes counted.
@Suite("Memory caches count what their entries really allocate", .serialized)
struct MemoryAccountingTests {
    /// Enough entries (about 90 MB of tokens, 140 MB of accounts) that malloc's own slack is
    /// small beside them.
    static let count = 20_000
    /// Set to 1 in the process that runs `MemoryAccountingProbe`; the lines it prints start with `probePrefix`.
    static let probeVariable = "TOKENRELAY_MEMORY_PROBE"
    static let probePrefix = "memory-probe: "

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

    /// `text` in a buffer of its own that exactly fits, as every string read from a database row
    /// or parsed from JSON is (a literal is not on the heap; one built by appending has spare capacity).
    static func exact(_ text: String) -> String { String(decoding: Array(text.utf8), as: UTF8.self) }

    static func accountId(_ index: Int) -> String {
        let digits = String(index)
        return "acc_scale_" + String(repeating: "0", count: max(0, 10 - digits.count)) + digits
    }

    /// An access token as the STS issues one for Graph (about 1.4 KB), for account `index`.
    static func token(_ index: Int) -> StoredAccessToken {
        let secret = exact("eyJ0eXAiOiJKV1QiLCJub25jZSI6" + base64url(1_100, seed: index) + "." + base64url(342, seed: index + 1))
        return StoredAccessToken(
            accountId: exact(accountId(index)), environment: exact("login.microsoftonline.com"), realm: exact(uuid(index % 100, 1)),
            clientId: exact("6731de76-14a6-49ae-97bc-6eba6914391e"),
            scopes: [exact("https://graph.microsoft.com/User.Read"), exact("https://graph.microsoft.com/Mail.Read")],
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
        // As `TokenStore` reads an account: every field from the row, the profiles from their JSON column.
        return AccountRecord(
            accountId: exact(accountId(index)), clientId: exact("6731de76-14a6-49ae-97bc-6eba6914391e"),
            environment: exact("login.microsoftonline.com"), homeAccountId: exact("\(oid).\(realm)"), realm: exact(realm), localAccountId: exact(oid),
            username: exact("user\(index)@contoso.example"), name: exact("Scale User \(index)"),
            authority: exact("https://login.microsoftonline.com/\(realm)"), authorityType: .aad, state: .active, idTokenClaims: exact(claims),
            createdAt: exact("2026-11-29T00:00:00.000000Z"), lastUsedAt: exact("2026-12-01T10:00:00.000000Z"),
            tenantProfiles: TenantProfile.list(from: #"[{"realm":"\#(realm)","local_account_id":"\#(oid)","is_home":true}]"#))
    }

    /// Heap growth and bytes counted for `count` entries stored in a new cache.
    static func measure(_ fill: () -> (counted: Int, entries: Int, cache: AnyObject)) -> (grown: Int, counted: Int, entries: Int) {
        let before = HeapBytes.inUse
        let (counted, entries, cache) = fill()
        let grown = withExtendedLifetime(cache) { HeapBytes.inUse - before }
        return (grown, counted, entries)
    }

    static func fillTokens() -> (counted: Int, entries: Int, cache: AnyObject) {
        let cache = MemoryTokenCache(capacityBytes: 1 << 30)
        for index in 0..<count { cache.store(token(index), now: 500) }
        return (cache.usage.bytes, cache.usage.entries, cache)
    }

    static func fillAccounts() -> (counted: Int, entries: Int, cache: AnyObject) {
        let cache = AccountCache(ttl: 3600, capacityBytes: 1 << 30)
        let mark = cache.readMark
        for index in 0..<count { cache.store(account(index), readMark: mark) }
        return (cache.usage.bytes, cache.usage.entries, cache)
    }

    /// The heap count is process-wide: in a whole `swift test` run, suites running beside a fill
    /// moved its ratio by -0.2 to +0.3. So the fill runs in a process of its own, this test bundle
    /// again with only `MemoryAccountingProbe/probe` selected, which prints what it measured.
    /// - Returns: each line it printed, as its `name=value` fields.
    static func measuredAlone(_ probe: String) async throws -> [[String: Int]] {
        let run = try await BuiltProducts.run(
            executableAt: URL(fileURLWithPath: CommandLine.arguments[0]).path,
            ["--testing-library", "swift-testing", "--filter", "MemoryAccountingProbe/\(probe)"],
            environment: ProcessInfo.processInfo.environment.merging([MemoryAccountingTests.probeVariable: "1"]) { $1 })
        // Its test report stays out of this run's: only the measured lines are passed on.
        let reports = (run.output + run.error).split(separator: "\n").filter { $0.hasPrefix(MemoryAccountingTests.probePrefix) }
        guard run.status == 0, !reports.isEmpty else {
            throw TestFailure("the probe \(probe) exited \(run.status) with no report:\n\(run.output)\n\(run.error)")
        }
        return reports.map { report in
            print(report)
            return Dictionary(
                uniqueKeysWithValues: report.dropFirst(MemoryAccountingTests.probePrefix.count).split(separator: " ").compactMap { pair -> (String, Int)? in
                    let parts = pair.split(separator: "=")
                    guard parts.count == 2, let value = Int(parts[1]) else { return nil }
                    return (String(parts[0]), value)
                })
        }
    }

    /// Heap growth over bytes counted for each of the probe's two fills of `count` entries: a
    /// fill alone varies by a few hundredths (malloc reuses what the first fill's cache freed).
    static func fillRatios(_ probe: String) async throws -> [Double] {
        let reports = try await measuredAlone(probe)
        #expect(reports.count == 2)
        return try reports.map { fields in
            let grown = try #require(fields["grown"]), counted = try #require(fields["counted"])
            #expect(fields["entries"] == count)
            return Double(grown) / Double(counted)
        }
    }

    /// String lengths around every boundary of the layout: inline (15), the 16-byte steps, the
    /// breadcrumbs (64), tails of 128 bytes and more, a JWT.
    static let stringLengths = Array(14...90) + [120, 126, 127, 128, 200, 500, 1_000, 1_473, 1_500, 2_000]

    @Test("A string costs what the heap grows by for it, at every length around the layout's steps")
    func strings() async throws {
        let reports = try await Self.measuredAlone("strings")
        #expect(reports.count == Self.stringLengths.count)
        for fields in reports {
            let length = try #require(fields["length"]), grown = try #require(fields["grown"]), entries = try #require(fields["entries"])
            let sample = String(decoding: Array(repeating: UInt8(ascii: "a"), count: length), as: UTF8.self)
            // Within 2 bytes: what the probe itself allocates meanwhile is not the strings' (a wrong
            // layout is off by 16 or more).
            let each = (grown + entries / 2) / entries
            #expect(abs(HeapCost.string(sample) - each) <= 2, "length \(length): \(each) bytes each on the heap")
        }
    }

    @Test("Access tokens: the heap grows by the bytes counted, within 15 %")
    func tokens() async throws {
        for ratio in try await Self.fillRatios("tokens") {
            #expect((0.85...1.15).contains(ratio), "heap growth / counted bytes = \(ratio)")
        }
    }

    @Test("Accounts: the heap grows by the bytes counted, within 15 %")
    func accounts() async throws {
        for ratio in try await Self.fillRatios("accounts") {
            #expect((0.85...1.15).contains(ratio), "heap growth / counted bytes = \(ratio)")
        }
    }
}

/// The fills `MemoryAccountingTests` measures, run only in the process it starts for them.
@Suite(
    "Memory accounting probe (run alone by MemoryAccountingTests)",
    .enabled(if: ProcessInfo.processInfo.environment[MemoryAccountingTests.probeVariable] == "1"))
struct MemoryAccountingProbe {
    static func report(_ fill: () -> (counted: Int, entries: Int, cache: AnyObject)) {
        for _ in 0..<2 {
            let (grown, counted, entries) = MemoryAccountingTests.measure(fill)
            print("\(MemoryAccountingTests.probePrefix)grown=\(grown) counted=\(counted) entries=\(entries)")
        }
    }

    @Test("Make 4,000 strings of each length, printing the heap's growth")
    func strings() {
        for length in MemoryAccountingTests.stringLengths {
            let bytes = Array(repeating: UInt8(ascii: "a"), count: length)
            var held: [String] = []
            held.reserveCapacity(4_000)
            let before = HeapBytes.inUse
            for _ in 0..<4_000 { held.append(String(decoding: bytes, as: UTF8.self)) }
            let grown = HeapBytes.inUse - before
            withExtendedLifetime(held) {
                print("\(MemoryAccountingTests.probePrefix)length=\(length) grown=\(grown) entries=\(held.count)")
            }
        }
    }

    @Test("Fill the access-token cache twice, printing heap growth and bytes counted")
    func tokens() { Self.report(MemoryAccountingTests.fillTokens) }

    @Test("Fill the account cache twice, printing heap growth and bytes counted")
    func accounts() { Self.report(MemoryAccountingTests.fillAccounts) }
}
