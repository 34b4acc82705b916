import Foundation
import HTTPCommon
import IdentityCore
import PostgresBridge
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayStore

/// Liveness and readiness in the shape of the IETF "Health Check Response Format for HTTP APIs"
/// draft (`application/health+json`): `status` pass|warn|fail, `version`, `releaseId`, and
/// `checks` whose values are arrays of objects (behaviour §8, §12 Health), for both probes.
package struct HealthChecks: Sendable {
    package static let version = BuildInfo.version
    package static let releaseId = BuildInfo.releaseId

    package let database: Database
    package let migrator: Migrator?
    package let keyRing: KeyRing
    /// Key usage: readiness reads the encryption counts (stored and not yet written) and warns past
    /// ``rotationThreshold`` (behaviour §12 Encryption keys). It writes nothing.
    package var ciphertexts: CiphertextStore? = nil

    /// Encryptions under one key after which readiness warns to rotate: 2^31, far below the
    /// 2^32 random 96-bit nonces NIST SP 800-38D §8.3 allows per AES-GCM key.
    package static let rotationThreshold: Int64 = 1 << 31
    /// The client credential's rejection and expiry warnings (behaviour §12 Health).
    package var credential: CredentialHealth? = nil

    /// The service's clock (``RelayClock``): check times, response times, uptime.
    package let clock: RelayClock
    /// When the service started (the checks are built at start-up), for the `uptime` check:
    /// ``RelayClock/monotonicSeconds``.
    package let started: Double
    /// Where every readiness result lands as `tokenrelay_ready`, whoever asked (a probe of
    /// `/readyz` or the periodic ``ReadinessSelfCheck``).
    package var metrics: Metrics? = nil

    package init(
        database: Database, migrator: Migrator?, keyRing: KeyRing, ciphertexts: CiphertextStore? = nil, credential: CredentialHealth? = nil,
        metrics: Metrics? = nil, clock: RelayClock = .system
    ) {
        self.clock = clock
        started = clock.monotonicSeconds
        self.database = database
        self.migrator = migrator
        self.keyRing = keyRing
        self.ciphertexts = ciphertexts
        self.credential = credential
        self.metrics = metrics
    }

    /// The process serves: `pass` with an `uptime` check in seconds (the draft's §4 example of
    /// a system-wide check). Answered on the server thread: no I/O, no lock.
    package func liveness() -> HTTPResponse {
        let seconds = clock.monotonicSeconds - started
        return respond(
            status: "pass",
            checks: [
                "uptime": .array([
                    .object([
                        "componentType": .string("system"), "observedValue": .number((seconds * 1000).rounded(.down) / 1000),
                        "observedUnit": .string("s"), "status": .string("pass"), "time": .string(clock.date.formatted(.iso8601)),
                    ])
                ])
            ])
    }

    /// Database reachable, migrations current, encryption key loaded; 503 otherwise. Reads only:
    /// Kubernetes probes every few seconds on every replica (behaviour §8.1). Sets `tokenrelay_ready`.
    package func readiness() async -> HTTPResponse {
        let response = await check()
        metrics?.set("tokenrelay_ready", value: response.status == 200 ? 1 : 0)
        metrics?.set("tokenrelay_ready_checked_timestamp_seconds", value: clock.unixTime.rounded())
        return response
    }

    private func check() async -> HTTPResponse {
        let time = clock.date.formatted(.iso8601)
        var checks: [String: JSONValue] = [:]
        var overall = "pass"
        let started = clock.monotonicSeconds
        do {
            let pending = try await database.run { connection -> [String] in
                _ = try connection.query("SELECT 1")
                return try migrator?.pending(on: connection) ?? []
            }
            let elapsed = (clock.monotonicSeconds - started) * 1000
            checks["postgresql:responseTime"] = .array([
                .object([
                    "status": .string("pass"), "observedValue": .number((elapsed * 100).rounded() / 100), "observedUnit": .string("ms"), "time": .string(time),
                ])
            ])
            let migrationsOK = pending.isEmpty
            if !migrationsOK { overall = "fail" }
            checks["migrations:pending"] = .array([
                .object(
                    [
                        "status": .string(migrationsOK ? "pass" : "fail"), "observedValue": .number(Double(pending.count)), "time": .string(time),
                    ].merging(migrationsOK ? [:] : ["output": .string("run `token-relay migrate`")]) { $1 })
            ])
        } catch {
            overall = "fail"
            checks["postgresql:responseTime"] = .array([
                .object([
                    "status": .string("fail"), "output": .string("the database is unreachable"), "time": .string(time),
                ])
            ])
        }
        let ring = ciphertexts?.cipher.ring ?? keyRing
        var keyCheck: [String: JSONValue] = [
            "status": .string("pass"), "observedValue": .number(Double(ring.keys.count)), "componentId": .string(ring.primary.id), "time": .string(time),
        ]
        if let usage = try? await ciphertexts?.usage() {
            let (keyId, used) = usage
            keyCheck["componentId"] = .string(keyId)
            keyCheck["observedValue"] = .number(Double(used))
            keyCheck["observedUnit"] = .string("encryptions")
            if used > Self.rotationThreshold {
                keyCheck["status"] = .string("warn")
                keyCheck["output"] = .string(
                    DataKey.isDataKeyId(keyId)
                        ? "data key '\(keyId)' has made more than 2^31 encryptions: its tenant's data key should be replaced (not yet automated, ADR 0017)"
                        : "key '\(keyId)' has made more than 2^31 encryptions: add a new first key and run `token-relay encryption rotate`")
                if overall == "pass" { overall = "warn" }
            }
        }
        checks["encryption:keys"] = .array([.object(keyCheck)])
        if let dataKeys = ciphertexts?.cipher.dataKeys {
            let (check, status) = await Self.keyEncryptionKeyCheck(dataKeys, time: time)
            checks["encryption:kek"] = .array([.object(check)])
            if status == "warn" && overall == "pass" { overall = "warn" }
        }
        if let credential {
            let (status, entries) = credential.check()
            checks["client:credential"] = .array(entries)
            if status == "fail" { overall = "fail" }
            if status == "warn" && overall == "pass" { overall = "warn" }
        }
        return respond(status: overall, checks: checks)
    }

    /// The key-encryption key in use (ADR 0017): its id, and the data keys still wrapped by
    /// another (`warn` until `token-relay encryption rewrap` has moved them); `warn` too when the
    /// key does not wrap now (an HSM failing: cached data keys still serve, new tenants get 503).
    package static func keyEncryptionKeyCheck(_ dataKeys: TenantDataKeys, time: String) async -> (check: [String: JSONValue], status: String) {
        let primary = dataKeys.keyEncryptionKeys.primary.id
        var check: [String: JSONValue] = ["componentId": .string(primary), "observedUnit": .string("data keys not under it"), "time": .string(time)]
        var problems: [String] = []
        if let failure = dataKeys.probe() {
            problems.append("the key-encryption key does not answer (\(failure.description)): cached data keys serve, new tenants get 503")
        }
        if let pending = try? await dataKeys.wrappedKeys.countNotWrappedBy(primary) {
            check["observedValue"] = .number(Double(pending))
            if pending > 0 { problems.append("\(pending) data key(s) are wrapped by an older key-encryption key: run `token-relay encryption rewrap`") }
        }
        let status = problems.isEmpty ? "pass" : "warn"
        check["status"] = .string(status)
        if !problems.isEmpty { check["output"] = .string(problems.joined(separator: "; ")) }
        return (check, status)
    }

    private func respond(status: String, checks: [String: JSONValue]) -> HTTPResponse {
        var body: [String: JSONValue] = ["status": .string(status), "version": .string(Self.version), "releaseId": .string(Self.releaseId)]
        if !checks.isEmpty { body["checks"] = .object(checks) }
        return HTTPResponse(
            status: status == "fail" ? 503 : 200, headers: ["Content-Type": "application/health+json", "Cache-Control": "no-store"],
            body: JSONWriter.encode(.object(body)))
    }
}
