import Foundation
import IdentityCore
import PostgresBridge
import Synchronization
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

/// The client credential's readiness warning and the issuance tally, on their own (behaviour §12
/// Health, Audit); the whole-stack behaviour is in EndToEndTests.
@Suite("Credential health and issuance counts")
struct CredentialHealthAndIssuanceTests {
    /// The service's test clock, moved by days.
    final class Clock: Sendable {
        let manual = TestClock(unixTime: 1_800_000_000)
        var clock: RelayClock { manual.clock }
        func now() -> Date { manual.clock.date }
        func advance(days: Double) { manual.advance(by: days * 86_400) }
    }

    static func rejection(_ code: Int) -> STSFailure {
        STSFailure(
            disposition: .clientCredentialRejected, problem: .upstreamError, status: 502, error: "invalid_client", stsErrorCodes: [code],
            detail: "AADSTS\(code): rejected.")
    }

    static func output(_ entries: [JSONValue]) -> String {
        entries.compactMap { $0["output"]?.stringValue }.joined(separator: " | ")
    }

    @Test("A rejected credential warns with the code and time until the next accepted call; other failures do not")
    func rejectionWarnsUntilAccepted() {
        let metrics = Metrics()
        let clock = Clock()
        let health = CredentialHealth(metrics: metrics, clock: clock.clock)
        #expect(health.check().status == "pass")
        health.observe(
            STSFailure(disposition: .refreshTokenDead, problem: .interactionRequired, stsErrorCodes: [700082], detail: "AADSTS700082."))
        #expect(health.check().status == "pass")
        #expect(metrics.render().contains("tokenrelay_client_credential_rejected 0"))

        health.observe(Self.rejection(7000215))
        let (status, entries) = health.check()
        #expect(status == "warn")
        #expect(Self.output(entries).contains("AADSTS7000215"))
        #expect(!Self.output(entries).contains("expired"))
        #expect(entries.first?["time"]?.stringValue == clock.now().formatted(.iso8601))
        #expect(metrics.value("tokenrelay_client_credential_rejections_total", ["code": "7000215"]) == 1)
        #expect(metrics.render().contains("tokenrelay_client_credential_rejected 1"))

        health.accepted()
        #expect(health.check().status == "pass")
        #expect(health.rejection == nil)
        #expect(metrics.render().contains("tokenrelay_client_credential_rejected 0"))
    }

    @Test("AADSTS7000222 says the client secret has expired")
    func expiredSecretSaysSo() {
        let health = CredentialHealth(metrics: Metrics())
        health.observe(Self.rejection(7000222))
        let (status, entries) = health.check()
        #expect(status == "warn")
        #expect(Self.output(entries).contains("client secret has expired"))
        #expect(Self.output(entries).contains("AADSTS7000222"))
    }

    @Test("A credential expiring within 14 days warns; one expiring later passes; an expired one says so")
    func expiryWindow() {
        let metrics = Metrics()
        let clock = Clock()
        let health = CredentialHealth(metrics: metrics, clock: clock.clock)
        health.expiresAt(clock.now().addingTimeInterval(15 * 86_400))
        #expect(health.check().status == "pass")
        #expect(metrics.render().contains("tokenrelay_client_credential_expiring 0"))
        clock.advance(days: 1.5)
        let (status, entries) = health.check()
        #expect(status == "warn")
        #expect(Self.output(entries).contains("within 14 days"))
        #expect(metrics.render().contains("tokenrelay_client_credential_expiring 1"))
        clock.advance(days: 14)
        #expect(Self.output(health.check().entries).contains("expired at"))
        // A certificate's notAfter goes through the same hook.
        health.expiresAt(clock.now().addingTimeInterval(86_400), credential: "client certificate")
        #expect(Self.output(health.check().entries).contains("client certificate expires at"))
        health.expiresAt(nil)
        #expect(health.check().status == "pass")
        #expect(metrics.render().contains("tokenrelay_client_credential_expiring 0"))
        #expect(!metrics.render().contains("tokenrelay_client_credential_expiry_timestamp_seconds"))
    }

    @Test("TOKENRELAY_CLIENT_SECRET_EXPIRES_AT takes RFC 3339 and names itself when malformed")
    func expirySetting() throws {
        func load(_ value: String) throws -> Configuration {
            try ConfigurationLoader(environment: ["TOKENRELAY_CLIENT_SECRET_EXPIRES_AT": value]).load(requireIdentity: false)
        }
        #expect(try load("2027-03-31T00:00:00Z").credential.secretExpiresAt == Date(timeIntervalSince1970: 1_806_451_200))
        #expect(try load("2027-03-31T02:00:00+02:00").credential.secretExpiresAt == Date(timeIntervalSince1970: 1_806_451_200))
        #expect(try load("2027-03-31T00:00:00.500Z").credential.secretExpiresAt == Date(timeIntervalSince1970: 1_806_451_200.5))
        #expect(try ConfigurationLoader(environment: [:]).load(requireIdentity: false).credential.secretExpiresAt == nil)
        for bad in ["2027-03-31", "tomorrow", "2027-03-31T00:00:00", "1806451200"] {
            let error = #expect(throws: ConfigurationError.self) { try load(bad) }
            #expect(error?.setting == "TOKENRELAY_CLIENT_SECRET_EXPIRES_AT", "\(bad)")
        }
        let interval = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader(environment: ["TOKENRELAY_ISSUANCE_FLUSH_INTERVAL_S": "0"]).load(requireIdentity: false)
        }
        #expect(interval?.setting == "TOKENRELAY_ISSUANCE_FLUSH_INTERVAL_S")
    }

    @Test("The tally counts per (key, account), keeps the latest time and stays within its capacity")
    func tallyIsBounded() {
        let metrics = Metrics()
        let counter = IssuanceCounter(capacity: 2, metrics: metrics)
        counter.record(keyId: "k1", accountId: "a", at: 10)
        counter.record(keyId: "k1", accountId: "a", at: 5)
        counter.record(keyId: "k2", accountId: "a", at: 7)
        counter.record(keyId: "k3", accountId: "a", at: 8)
        #expect(counter.pendingCount == 2)
        #expect(metrics.value("tokenrelay_issuance_dropped_total") == 1)
    }

    @Test("A flush adds counts with one statement per batch; a failed flush keeps them for the next try", .timeLimit(.minutes(1)))
    func flushAddsAndRetries() async throws {
        let url = try await TestPostgres.freshDatabase(named: "issuance_flush")
        let pool = PostgresPool(url: url, size: 1)
        defer { pool.close() }
        _ = try await Migrator(directory: BuiltProducts.packageRoot() + "/migrations").apply(on: pool)
        let store = IssuanceStore(database: Database(pool: pool))
        let metrics = Metrics()
        let counter = IssuanceCounter(metrics: metrics)

        // The database refuses: nothing is lost.
        try await pool.withConnection { _ = try $0.query("ALTER TABLE token_issuance_counts RENAME TO token_issuance_counts_away") }
        counter.record(keyId: "k1", accountId: "acc1", at: 1_800_000_000)
        counter.record(keyId: "k1", accountId: "acc1", at: 1_800_000_001)
        #expect(await counter.flush(to: store) == false)
        #expect(counter.pendingCount == 1)
        #expect(metrics.value("tokenrelay_issuance_flushes_total", ["outcome": "failed"]) == 1)
        try await pool.withConnection { _ = try $0.query("ALTER TABLE token_issuance_counts_away RENAME TO token_issuance_counts") }

        counter.record(keyId: "k2", accountId: "acc1", at: 1_800_000_002)
        #expect(await counter.flush(to: store))
        #expect(counter.pendingCount == 0)
        counter.record(keyId: "k1", accountId: "acc1", at: 1_700_000_000)
        #expect(await counter.flush(to: store))
        #expect(metrics.value("tokenrelay_issuance_flushes_total", ["outcome": "written"]) == 2)
        let rows = try await store.counts(accountId: "acc1")
        #expect(rows.map(\.keyId) == ["k1", "k2"])
        #expect(rows.map(\.count) == [3, 1])
        // last_at keeps the later time even when an older tally arrives after a newer one.
        #expect(rows.first?.lastAt == "2027-01-15T08:00:01.000Z")
    }
}
