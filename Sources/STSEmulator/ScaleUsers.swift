import CryptoBridge

/// A million users without a million entries (bench/scale, `--scale-users N --scale-refresh-key
/// K`): user `i` (0 ≤ i < N) is derived from its index when a request names it, and so is the
/// refresh token `token-relay bench-seed` stored for it, so the emulator holds none of them in
/// memory until one is redeemed (then the rotated chain is remembered as any other).
///
/// User `i`: username `scale{i}@scale.example`, name `Scale User {i}`, `oid`
/// `5ca1e000-0000-4000-8000-` + `i` in 12 hex digits; home tenant the directory's first tenant,
/// except every 100th user (`i % 100 == 99`) in its second. Refresh token: `scale.{i}.` +
/// base64url(HMAC-SHA256(K, "scale-refresh|{i}")).
public struct ScaleUsers: Sendable, Equatable {
    /// How many users there are.
    public let count: Int
    private let key: [UInt8]

    public init(count: Int, key: [UInt8]) {
        self.count = count
        self.key = key
    }

    static let domain = "@scale.example"

    /// The index `username` names, when it is one of these users.
    func index(ofUsername username: String) -> Int? {
        let lower = username.lowercased()
        guard lower.hasPrefix("scale"), lower.hasSuffix(Self.domain),
            let index = Int(lower.dropFirst(5).dropLast(Self.domain.count)), (0..<count).contains(index)
        else { return nil }
        return index
    }

    /// The index a seeded refresh token stands for, when its MAC verifies.
    func index(ofRefreshToken token: String) -> Int? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "scale", let index = Int(parts[1]), (0..<count).contains(index) else { return nil }
        let expected = Base64URL.encode(HMACSHA256.authenticationCode(for: Array("scale-refresh|\(index)".utf8), key: key))
        return ConstantTime.equals(Array(parts[2].utf8), Array(expected.utf8)) ? index : nil
    }

    /// User `index` and its home tenant among `tenants` (non-B2C directory tenants), or nil without any.
    func user(_ index: Int, tenants: [TestTenant]) -> (user: TestUser, tenant: TestTenant)? {
        guard let first = tenants.first else { return nil }
        let tenant = index % 100 == 99 && tenants.count > 1 ? tenants[1] : first
        let hex = String(index, radix: 16)
        let oid = "5ca1e000-0000-4000-8000-" + String(repeating: "0", count: max(0, 12 - hex.count)) + hex
        return (TestUser(username: "scale\(index)\(Self.domain)", name: "Scale User \(index)", objectID: oid), tenant)
    }
}
