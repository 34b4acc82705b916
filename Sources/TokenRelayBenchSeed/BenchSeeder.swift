import CryptoBridge
import Foundation
import IdentityCore
import TokenRelayBase
import TokenRelayStore

/// `token-relay bench-seed` (bench/scale only, never in production): writes N signed-in accounts
/// straight into PostgreSQL, each with a refresh token the sts-emulator accepts when started with
/// `--scale-users N --scale-refresh-key K`, and one cached access token, sealed by the store's
/// own ``TokenCipher`` with the store's additional data (``SealingContext``), so the relay serves,
/// refreshes, rotates and deletes them like any other account.
///
/// Account `i` (0 ≤ i < N), the same derivation as the emulator's `ScaleUsers`:
/// - `account_id` `acc_scale_` + `i` in 10 digits (listing order is seeding order);
/// - username `scale{i}@scale.example`, `oid` `5ca1e000-0000-4000-8000-` + `i` in 12 hex digits;
/// - tenant: the authority's, except every 100th account (`i % 100 == 99`) in `secondTenant`;
/// - refresh token `scale.{i}.` + base64url(HMAC-SHA256(K, "scale-refresh|{i}")).
package struct BenchSeeder: Sendable {
    package let store: BenchSeedStore
    package let cipher: TokenCipher
    package let clientId: String
    /// The configured authority: its host is every account's environment.
    package let authority: Authority
    /// The tenant of every 100th account (tenant listing measures a tenant that is 1 % of all).
    package let secondTenant: String
    /// The HMAC key the emulator checks seeded refresh tokens with.
    package let refreshKey: [UInt8]
    /// The cached token's scopes, canonical (ScopeSet).
    package let scopes: ScopeSet
    /// Cached access tokens are valid this long from seeding (seconds).
    package let validitySeconds: Int
    package let now: Int

    package init(
        store: BenchSeedStore, cipher: TokenCipher, clientId: String, authority: Authority, secondTenant: String, refreshKey: [UInt8], scopes: ScopeSet,
        validitySeconds: Int, now: Int
    ) {
        self.store = store
        self.cipher = cipher
        self.clientId = clientId
        self.authority = authority
        self.secondTenant = secondTenant
        self.refreshKey = refreshKey
        self.scopes = scopes
        self.validitySeconds = validitySeconds
        self.now = now
    }

    package static func accountId(_ index: Int) -> String {
        let digits = String(index)
        return "acc_scale_" + String(repeating: "0", count: max(0, 10 - digits.count)) + digits
    }

    package static func objectId(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        return "5ca1e000-0000-4000-8000-" + String(repeating: "0", count: max(0, 12 - hex.count)) + hex
    }

    package static func refreshToken(_ index: Int, key: [UInt8]) -> String {
        "scale.\(index)." + Base64URL.encode(HMACSHA256.authenticationCode(for: Array("scale-refresh|\(index)".utf8), key: key))
    }

    package func tenant(of index: Int) -> String { index % 100 == 99 ? secondTenant : authority.tenant.lowercased() }

    /// The rows of account `index`, sealed.
    /// - Throws: `TokenCipherError` when sealing fails.
    package func account(_ index: Int) throws -> SeededAccount {
        let accountId = Self.accountId(index)
        let oid = Self.objectId(index)
        let tid = tenant(of: index)
        let username = "scale\(index)@scale.example"
        let name = "Scale User \(index)"
        let refresh = Self.refreshToken(index, key: refreshKey)
        let expiresOn = now + validitySeconds
        let claims: JSONValue = .object([
            "oid": .string(oid), "tid": .string(tid), "preferred_username": .string(username), "name": .string(name), "ver": .string("2.0"),
        ])
        let home = Authority(scheme: authority.scheme, host: authority.host, port: authority.port, tenant: tid, policy: nil, type: .aad)
        return SeededAccount(
            accountId: accountId, homeAccountId: oid + "." + tid, realm: tid, localAccountId: oid, username: username, name: name,
            authority: home.url, idTokenClaims: String(decoding: JSONWriter.encode(claims), as: UTF8.self),
            refreshToken: try cipher.seal(refresh, for: SealingContext(owner: accountId, kind: .refreshToken, clientId: clientId)),
            refreshFingerprint: TokenStore.lineageDigest(refresh), target: scopes.cacheKey, scopes: scopes.canonical.joined(separator: " "),
            accessToken: try cipher.seal(
                accessToken(index, oid: oid, tid: tid, expiresOn: expiresOn),
                for: SealingContext(owner: accountId, kind: .accessToken, clientId: clientId)),
            expiresOn: Int64(expiresOn))
    }

    /// A JWT-shaped access token of about the size the emulator issues (1.3 KB), unsigned: the
    /// relay never verifies the access tokens it holds, and its memory cost is the measured thing.
    package func accessToken(_ index: Int, oid: String, tid: String, expiresOn: Int) -> String {
        let header = Base64URL.encode(Array(#"{"alg":"RS256","typ":"JWT","kid":"bench-scale"}"#.utf8))
        let claims: JSONValue = .object([
            "aud": .string("https://graph.microsoft.com"), "iss": .string("https://sts.windows.net/\(tid)/"), "exp": .number(Double(expiresOn)),
            "oid": .string(oid), "tid": .string(tid), "scp": .string(scopes.canonical.joined(separator: " ")),
            "preferred_username": .string("scale\(index)@scale.example"), "uti": .string(String(repeating: "u", count: 22)),
        ])
        let payload = Base64URL.encode(JSONWriter.encode(claims))
        // 256 signature bytes, as RS256's.
        var signature: [UInt8] = []
        for block in 0..<8 { signature += SHA256.hash(Array("bench|\(index)|\(block)".utf8)) }
        return header + "." + payload + "." + Base64URL.encode(signature)
    }

    /// Seeds accounts `0..<count` in batches of `batchSize`, skipping a batch whose last account
    /// is stored already (a resumed run). Returns accounts added; `progress` gets (done, added).
    package func run(count: Int, batchSize: Int, progress: (Int, Int) -> Void) async throws -> Int {
        var added = 0
        var start = 0
        while start < count {
            let end = min(count, start + batchSize)
            if try await !store.exists(accountId: Self.accountId(end - 1)) {
                let batch = try (start..<end).map(account)
                added += try await store.insert(batch, environment: authority.environment)
            }
            start = end
            progress(start, added)
        }
        return added
    }
}
