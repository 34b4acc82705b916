import Foundation
import IdentityCore
import Synchronization
import TokenRelayBase

/// The health of TokenRelay's own confidential-client credential (behaviour §12 Problems, Health):
/// the STS's last rejection of it (AADSTS7000215, 7000222, 700016, ...) and when it expires.
/// Either turns readiness to `warn` (still HTTP 200) and shows in `/metrics`.
///
/// With several credentials (`TOKENRELAY_CLIENT_CREDENTIALS`) it says which one is in use
/// (`warn` while it is not the first) and, for a federated assertion file, the assertion's `exp`
/// (`warn` within 5 minutes of it, `fail` once passed when no other credential is configured).
///
/// Per replica: a replica learns of a rejection only from its own token-endpoint answers, and
/// the warning clears after its own next successful token-endpoint call.
package final class CredentialHealth: Sendable {
    /// A credential that expires this close (or has expired) warns: 14 days.
    package static let expiryWarningSeconds: TimeInterval = 14 * 86_400
    /// A federated assertion this close to its `exp` warns: 5 minutes. Its writer renews it well
    /// before (the kubelet at 80% of a projected token's lifetime, 12 minutes before a 1-hour one
    /// ends), so one this close means the writer has stopped.
    package static let assertionWarningSeconds: TimeInterval = 300

    /// The STS's last rejection: its codes, OAuth `error`, safe summary and when.
    package struct Rejection: Sendable, Equatable {
        package let stsErrorCodes: [Int]
        package let error: String?
        package let detail: String
        package let at: Date

        package init(stsErrorCodes: [Int], error: String?, detail: String, at: Date) {
            self.stsErrorCodes = stsErrorCodes
            self.error = error
            self.detail = detail
            self.at = at
        }
    }

    private struct State {
        var rejection: Rejection?
        var expiresAt: Date?
        /// What expires: "client secret" or "client certificate".
        var credential = "client secret"
    }

    private let state = Mutex(State())
    private let metrics: Metrics
    private let clock: RelayClock
    /// The configured credentials: which is in use, their expiry. Nil: only ``expiresAt(_:credential:)``.
    private let credential: ClientCredential?

    /// - Parameters:
    ///   - metrics: where `tokenrelay_client_credential_*` are set.
    ///   - clock: the service's clock. Default the system's.
    ///   - credential: the configured credentials, read at every check. Default none.
    package init(metrics: Metrics, clock: RelayClock = .system, credential: ClientCredential? = nil) {
        self.metrics = metrics
        self.clock = clock
        self.credential = credential
        metrics.describe(
            "tokenrelay_client_credential_in_use", "gauge",
            "Position (1 = first) of the client credential token requests try first, by kind; above 1 after a rejected credential.")
        metrics.describe("tokenrelay_client_credential_fallbacks_total", "counter", "Token requests handed to the next client credential after a rejection.")
        metrics.describe(
            "tokenrelay_client_credential_rejected", "gauge", "1 while the STS's last answer rejected the client credential (this replica), else 0.")
        metrics.describe("tokenrelay_client_credential_rejections_total", "counter", "Token-endpoint answers rejecting the client credential, by STS code.")
        metrics.set("tokenrelay_client_credential_rejected", value: 0)
        metrics.addGauges { [weak self] in
            guard let self else { return [] }
            var gauges: [(String, [String: String], Double)] = []
            if let inUse = credential?.inUse(at: clock.date) {
                gauges.append(("tokenrelay_client_credential_in_use", ["kind": inUse.entry.metricKind], Double(inUse.index + 1)))
            }
            // `expiring` is always exposed (0 while no expiry is known), so alert rules have a series.
            guard let expiresAt = expiry().date else { return gauges + [("tokenrelay_client_credential_expiring", [:], 0)] }
            let remaining = expiresAt.timeIntervalSince(clock.date)
            return gauges + [
                ("tokenrelay_client_credential_expiry_timestamp_seconds", [:], expiresAt.timeIntervalSince1970.rounded()),
                ("tokenrelay_client_credential_expiring", [:], remaining < Self.expiryWarningSeconds ? 1 : 0),
            ]
        }
    }

    /// When the credential in use expires and what it is: from the configured credentials when
    /// known, else what ``expiresAt(_:credential:)`` was told.
    private func expiry() -> (date: Date?, credential: String) {
        if let credential {
            let entry = credential.inUse(at: clock.date).entry
            return (entry.expiresAt, entry.label)
        }
        return state.withLock { ($0.expiresAt, $0.credential) }
    }

    /// Notes a classified token-endpoint failure; only a rejected client credential counts.
    package func observe(_ failure: STSFailure) {
        guard failure.disposition == .clientCredentialRejected else { return }
        let rejection = Rejection(stsErrorCodes: failure.stsErrorCodes, error: failure.error, detail: failure.detail, at: clock.date)
        state.withLock { $0.rejection = rejection }
        let code = failure.mostSpecificCode.map(String.init) ?? failure.error ?? "unknown"
        metrics.increment("tokenrelay_client_credential_rejections_total", ["code": code])
        metrics.set("tokenrelay_client_credential_rejected", value: 1)
    }

    /// Notes a successful token-endpoint call (the credential was accepted): clears a rejection.
    package func accepted() {
        let cleared = state.withLock { state -> Bool in
            defer { state.rejection = nil }
            return state.rejection != nil
        }
        if cleared { metrics.set("tokenrelay_client_credential_rejected", value: 0) }
    }

    /// Tells when the credential expires: `TOKENRELAY_CLIENT_SECRET_EXPIRES_AT` for a secret (the
    /// service cannot learn it), the certificate's `notAfter` for a certificate. Nil: unknown.
    /// - Parameters:
    ///   - date: the expiry instant.
    ///   - credential: what expires, for the readiness output ("client secret", "client certificate").
    package func expiresAt(_ date: Date?, credential: String = "client secret") {
        state.withLock {
            $0.expiresAt = date
            $0.credential = credential
        }
    }

    /// The last rejection this replica saw, if it has not cleared since.
    package var rejection: Rejection? { state.withLock { $0.rejection } }

    /// The `client:credential` readiness check: `warn` when rejected or expiring within 14 days.
    /// - Returns: the status and the check's entries (IETF health draft objects).
    package func check() -> (status: String, entries: [JSONValue]) {
        let snapshot = state.withLock { $0 }
        let (expiresAt, what) = expiry()
        let now = clock.date
        let time = now.formatted(.iso8601)
        var entries: [JSONValue] = []
        if let rejection = snapshot.rejection {
            let codes = rejection.stsErrorCodes.map { "AADSTS\($0)" }.joined(separator: ", ")
            let what =
                rejection.stsErrorCodes.contains(7000222)
                ? "the \(what) has expired" : "the identity provider rejected the client credential"
            var entry: [String: JSONValue] = [
                "componentId": .string("sts-rejection"), "status": .string("warn"), "time": .string(rejection.at.formatted(.iso8601)),
                "observedValue": .array(rejection.stsErrorCodes.map { .number(Double($0)) }),
                "output": .string(
                    "\(what) (\(codes.isEmpty ? rejection.error ?? "invalid_client" : codes)) at \(rejection.at.formatted(.iso8601)); "
                        + "renew or fix the credential; this clears after the next successful token-endpoint call of this replica"),
            ]
            if let error = rejection.error { entry["sts_error"] = .string(error) }
            entries.append(.object(entry))
        }
        if let expiresAt {
            let remaining = expiresAt.timeIntervalSince(now)
            let expiring = remaining < Self.expiryWarningSeconds
            var entry: [String: JSONValue] = [
                "componentId": .string("expiry"), "status": .string(expiring ? "warn" : "pass"), "time": .string(time),
                "observedValue": .number((remaining / 86_400 * 10).rounded(.down) / 10), "observedUnit": .string("d"),
            ]
            if expiring {
                entry["output"] = .string(
                    remaining <= 0
                        ? "the \(what) expired at \(expiresAt.formatted(.iso8601)); renew it"
                        : "the \(what) expires at \(expiresAt.formatted(.iso8601)), within 14 days; renew it")
            }
            entries.append(.object(entry))
        }
        if let credential {
            entries += Self.listEntries(credential, now: now)
        }
        if entries.isEmpty {
            entries.append(.object(["status": .string("pass"), "time": .string(time)]))
        }
        if entries.contains(where: { $0["status"]?.stringValue == "fail" }) { return ("fail", entries) }
        let warns = entries.contains { $0["status"]?.stringValue == "warn" }
        return (warns ? "warn" : "pass", entries)
    }

    /// The `in-use` entry (several credentials) and one `assertion-expiry` entry per federated
    /// assertion file. `credential` is the 1-based position in the configured list.
    private static func listEntries(_ credential: ClientCredential, now: Date) -> [JSONValue] {
        let time = now.formatted(.iso8601)
        let configured = credential.entries
        var entries: [JSONValue] = []
        if configured.count > 1 {
            let inUse = credential.inUse(at: now)
            var entry: [String: JSONValue] = [
                "componentId": .string("in-use"), "status": .string(inUse.index == 0 ? "pass" : "warn"), "time": .string(time),
                "observedValue": .number(Double(inUse.index + 1)), "credential": .number(Double(inUse.index + 1)), "kind": .string(inUse.entry.metricKind),
            ]
            if inUse.index > 0 {
                var why = ""
                if let rejected = credential.lastRejected {
                    let codes = rejected.stsErrorCodes.map { "AADSTS\($0)" }.joined(separator: ", ")
                    let named = codes.isEmpty ? "" : " (\(codes))"
                    why = ": the identity provider rejected credential \(rejected.index + 1)\(named) at \(rejected.at.formatted(.iso8601))"
                }
                entry["output"] = .string(
                    "credential \(inUse.index + 1) of \(configured.count) (\(inUse.entry.label)) is in use\(why); "
                        + "fix or remove the credentials before it; the first is tried again after TOKENRELAY_CLIENT_CREDENTIAL_FALLBACK_S")
            }
            entries.append(.object(entry))
        }
        for (index, configuredEntry) in configured.enumerated() {
            guard case .assertionFile(let path) = configuredEntry.kind else { continue }
            var entry: [String: JSONValue] = ["componentId": .string("assertion-expiry"), "credential": .number(Double(index + 1)), "time": .string(time)]
            guard let exp = credential.assertionExpiry(path) else {
                entry["status"] = .string("warn")
                entry["output"] = .string("the federated assertion file holds no JWT with an exp claim")
                entries.append(.object(entry))
                continue
            }
            let remaining = TimeInterval(exp) - now.timeIntervalSince1970
            let expiresAt = Date(timeIntervalSince1970: TimeInterval(exp)).formatted(.iso8601)
            entry["observedValue"] = .number(remaining.rounded(.down))
            entry["observedUnit"] = .string("s")
            if remaining <= 0 {
                // Alone it cannot serve: not ready. Beside other credentials, a rejection moves requests on.
                entry["status"] = .string(configured.count == 1 ? "fail" : "warn")
                entry["output"] = .string("the federated assertion in the file expired at \(expiresAt); its writer has stopped renewing it")
            } else if remaining < assertionWarningSeconds {
                entry["status"] = .string("warn")
                entry["output"] = .string("the federated assertion in the file expires at \(expiresAt), within 5 minutes, and has not been renewed")
            } else {
                entry["status"] = .string("pass")
            }
            entries.append(.object(entry))
        }
        return entries
    }
}
