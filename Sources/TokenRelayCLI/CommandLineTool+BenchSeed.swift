import Foundation
import IdentityCore
import PostgresBridge
import TokenRelayBase
import TokenRelayBenchSeed
import TokenRelayServer
import TokenRelayStore

/// `token-relay bench-seed` (a benchmark tool for bench/scale; see ``BenchSeeder``).
extension CommandLineTool {
    package static let benchSeedUsage = """
        usage: token-relay bench-seed --accounts N [--batch 5000] [--second-tenant T] [--scopes S1,S2] [--valid-seconds 21600]
          BENCHMARK TOOL (bench/scale), not for a production database: writes N signed-in accounts acc_scale_0000000000…
          straight into TOKENRELAY_DATABASE_URL, each with a refresh token and one cached access token sealed under the
          ring's first key (TOKENRELAY_ENCRYPTION_KEYS), in batches of multi-row INSERTs. Their refresh tokens are the
          ones sts-emulator --scale-users N --scale-refresh-key K accepts; K comes from TOKENRELAY_BENCH_REFRESH_KEY
          (the environment, so it stays out of the process list). Every 100th account is in --second-tenant (default
          22222222-2222-2222-2222-222222222222), the others in TOKENRELAY_AUTHORITY's tenant. Re-running resumes: a batch
          already stored is skipped. Prints {"accounts", "added", "seconds"}.
        usage: token-relay bench-seed --data-keys N
          BENCHMARK TOOL (bench/rewrap): makes data keys for N tenants bench-tenant-0…, each wrapped by the first
          key-encryption key (the HSM's with TOKENRELAY_PKCS11_*, else the ring's first key), as a first sign-in of
          each tenant would. Prints {"data_keys", "seconds"}.
        """

    package static func benchSeed(_ arguments: [String], _ configuration: Configuration) async throws -> Int32 {
        let path = ["bench-seed"]
        if let text = option("--data-keys", in: arguments) {
            guard let count = Int(text), (1...1_000_000).contains(count) else {
                return usageError("bench-seed: --data-keys must be an integer from 1 to 1000000", help: path)
            }
            return try await seedDataKeys(count, configuration)
        }
        guard let count = option("--accounts", in: arguments).flatMap(Int.init), (1...100_000_000).contains(count) else {
            return usageError("bench-seed: --accounts must be an integer from 1 to 100000000", help: path)
        }
        let batchSize = option("--batch", in: arguments).map { Int($0) ?? 0 } ?? 5000
        guard (1...50_000).contains(batchSize) else { return usageError("bench-seed: --batch must be an integer from 1 to 50000", help: path) }
        let validity = option("--valid-seconds", in: arguments).map { Int($0) ?? 0 } ?? 21_600
        guard validity > 300 else { return usageError("bench-seed: --valid-seconds must be more than the 300 s expiry skew", help: path) }
        guard let key = ProcessInfo.processInfo.environment["TOKENRELAY_BENCH_REFRESH_KEY"], !key.isEmpty else {
            throw ConfigurationError(setting: "TOKENRELAY_BENCH_REFRESH_KEY", reason: "is required (the emulator's --scale-refresh-key)")
        }
        guard !configuration.database.url.isEmpty else { throw ConfigurationError(setting: "TOKENRELAY_DATABASE_URL", reason: "is required") }
        let ring: KeyRing
        do { ring = try KeyRing(parsing: configuration.encryption.keys) } catch {
            throw ConfigurationError(setting: "TOKENRELAY_ENCRYPTION_KEYS", reason: error.description)
        }
        let authority: Authority
        do {
            authority = try AuthorityValidator(
                knownAuthorities: configuration.identity.knownAuthorities, allowHTTPLoopback: configuration.identity.allowHTTPLoopback,
                defaultAuthority: configuration.identity.authority
            ).validate(configuration.identity.authority)
        } catch {
            throw ConfigurationError(setting: "TOKENRELAY_AUTHORITY", reason: error.detail)
        }
        let requestedScopes = try listOption("--scopes", in: arguments)
        let scopes = ScopeSet(normalizing: requestedScopes.isEmpty ? ["https://graph.microsoft.com/User.Read"] : requestedScopes)
        let pool = PostgresPool(url: configuration.database.url, size: 1)
        defer { pool.close() }
        let clientId = configuration.identity.clientId
        let started = Date()
        let seeder = BenchSeeder(
            store: BenchSeedStore(database: Database(pool: pool), clientId: clientId), cipher: TokenCipher(ring: ring), clientId: clientId,
            authority: authority, secondTenant: (option("--second-tenant", in: arguments) ?? "22222222-2222-2222-2222-222222222222").lowercased(),
            refreshKey: Array(key.utf8), scopes: scopes, validitySeconds: validity, now: Int(started.timeIntervalSince1970))
        var reported = 0
        let added = try await seeder.run(count: count, batchSize: batchSize) { done, added in
            // A line per 10 % on standard error, for a run that takes minutes.
            guard done * 10 / count > reported || done == count else { return }
            reported = done * 10 / count
            FileHandle.standardError.write(Data("bench-seed: \(done)/\(count) (\(added) added, \(Int(Date().timeIntervalSince(started))) s)\n".utf8))
        }
        let seconds = Date().timeIntervalSince(started).rounded()
        printJSON(.object(["accounts": .number(Double(count)), "added": .number(Double(added)), "seconds": .number(seconds)]))
        return 0
    }

    /// Data keys for `count` synthetic tenants, made one after another through ``TenantDataKeys``
    /// (find, wrap, insert: what a new tenant's first write costs).
    package static func seedDataKeys(_ count: Int, _ configuration: Configuration) async throws -> Int32 {
        guard !configuration.database.url.isEmpty else { throw ConfigurationError(setting: "TOKENRELAY_DATABASE_URL", reason: "is required") }
        let ring: KeyRing
        do { ring = try KeyRing(parsing: configuration.encryption.keys) } catch {
            throw ConfigurationError(setting: "TOKENRELAY_ENCRYPTION_KEYS", reason: error.description)
        }
        let hsm = try configuration.encryption.pkcs11.map(HSMKeys.open) ?? []
        let pool = PostgresPool(url: configuration.database.url, size: 1)
        defer { pool.close() }
        let dataKeys = TenantDataKeys(
            store: DataKeyStore(database: Database(pool: pool)), keys: KeyEncryptionKeys(ring: ring, hsm: hsm), capacity: 1, holdSeconds: 1)
        let started = Date()
        for index in 0..<count { _ = try await dataKeys.key(forTenant: "bench-tenant-\(index)") }
        let seconds = (Date().timeIntervalSince(started) * 100).rounded() / 100
        printJSON(.object(["data_keys": .number(Double(count)), "seconds": .number(seconds)]))
        return 0
    }
}
