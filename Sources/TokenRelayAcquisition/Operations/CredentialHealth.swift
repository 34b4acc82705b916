import Foundation
import IdentityCore
import Synchronization
import TokenRelayBase

/// The health of TokenRelay's own confidential-client credential (behaviour §12 Problems, Health):
/// the STS's last rejection of it (AADSTS7000215, 7000222, 700016, ...) and when it expires.
/// Either turns readiness to `warn` (still HTTP 200) and shows in `/metrics`.
///
/// Per replica: a replica learns of a rejection only from its own token-endpoint answers, and
/// the warning clears after its own next successful token-endpoint call.
package final class CredentialHealth: Sendable {
    /// A credential that expires this close (or has expired) warns: 14 days.
    package static let expiryWarningSeconds: TimeInterval = 14 * 86_400

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

    /// - Parameters:
    ///   - metrics: where `tokenrelay_client_credential_*` are set.
    ///   - clock: the service's clock. Default the system's.
    package init(metrics: Metrics, clock: RelayClock = .system) {
        self.metrics = metrics
        self.clock = clock
        metrics.describe(
            "tokenrelay_client_credential_rejected", "gauge", "1 while the STS's last answer rejected the client credential (this replica), else 0.")
        metrics.describe("tokenrelay_client_credential_rejections_total", "counter", "Token-endpoint answers rejecting the client credential, by STS code.")
        metrics.set("tokenrelay_client_credential_rejected", value: 0)
        metrics.addGauges { [weak self] in
            guard let self else { return [] }
            // `expiring` is always exposed (0 while no expiry is known), so alert rules have a series.
            guard let expiresAt = state.withLock({ $0.expiresAt }) else { return [("tokenrelay_client_credential_expiring", [:], 0)] }
            let remaining = expiresAt.timeIntervalSince(clock.date)
            return [
                ("tokenrelay_client_credential_expiry_timestamp_seconds", [:], expiresAt.timeIntervalSince1970.rounded()),
                ("tokenrelay_client_credential_expiring", [:], remaining < Self.expiryWarningSeconds ? 1 : 0),
            ]
        }
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
        let now = clock.date
        let time = now.formatted(.iso8601)
        var entries: [JSONValue] = []
        if let rejection = snapshot.rejection {
            let codes = rejection.stsErrorCodes.map { "AADSTS\($0)" }.joined(separator: ", ")
            let what =
                rejection.stsErrorCodes.contains(7000222)
                ? "the \(snapshot.credential) has expired" : "the identity provider rejected the client credential"
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
        if let expiresAt = snapshot.expiresAt {
            let remaining = expiresAt.timeIntervalSince(now)
            let expiring = remaining < Self.expiryWarningSeconds
            var entry: [String: JSONValue] = [
                "componentId": .string("expiry"), "status": .string(expiring ? "warn" : "pass"), "time": .string(time),
                "observedValue": .number((remaining / 86_400 * 10).rounded(.down) / 10), "observedUnit": .string("d"),
            ]
            if expiring {
                entry["output"] = .string(
                    remaining <= 0
                        ? "the \(snapshot.credential) expired at \(expiresAt.formatted(.iso8601)); renew it"
                        : "the \(snapshot.credential) expires at \(expiresAt.formatted(.iso8601)), within 14 days; renew it")
            }
            entries.append(.object(entry))
        }
        if entries.isEmpty {
            entries.append(.object(["status": .string("pass"), "time": .string(time)]))
        }
        let warns = entries.contains { $0["status"]?.stringValue == "warn" }
        return (warns ? "warn" : "pass", entries)
    }
}
