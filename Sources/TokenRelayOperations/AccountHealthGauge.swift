import Foundation
import IdentityCore
import Synchronization
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayStore

/// `tokenrelay_accounts{state, failure_class}`: accounts by state and the class of their current
/// failure (`none` without one; behaviour §3.8, §8.2). A scrape reads the last counts this
/// service took; the counting statement runs every `intervalSeconds`
/// (`TOKENRELAY_ACCOUNT_HEALTH_INTERVAL_S`), the first at start, never per scrape. Every
/// (state, class) pair is exposed, 0 when no account has it, so alert rules always have a series.
package final class AccountHealthGauge: Service {
    package let store: TokenStore
    package let intervalSeconds: Int
    private let logger: Logger
    private let counts = Mutex<AccountHealthCounts?>(nil)

    package static let metricName = "tokenrelay_accounts"
    package static let states = ["active", "interaction_required"]
    package static let classes = ["none"] + FailureClass.allCases.map(\.rawValue)

    package init(store: TokenStore, metrics: Metrics, intervalSeconds: Int, logger: Logger) {
        self.store = store
        self.intervalSeconds = intervalSeconds
        self.logger = logger
        metrics.describe(
            Self.metricName, "gauge",
            "Accounts by state and the class of their current failure (none, transient, user_action, admin_action, configuration), counted periodically.")
        metrics.addGauges { [weak self] in
            guard let self, let counts = self.counts.withLock({ $0 }) else { return [] }
            return Self.states.flatMap { state in
                Self.classes.map { failureClass in
                    (
                        Self.metricName, ["state": state, "failure_class": failureClass],
                        Double(counts.counts[.init(state: state, failureClass: failureClass)] ?? 0)
                    )
                }
            }
        }
    }

    /// Counts once now; the gauge keeps the last counts when PostgreSQL cannot answer.
    package func refresh() async {
        do {
            let fresh = try await store.accountHealthCounts()
            counts.withLock { $0 = fresh }
        } catch {
            logger.warn("accounts.health_count_failed", ["error": String(describing: type(of: error))])
        }
    }

    package func run() async {
        while !Task.isCancelled {
            await refresh()
            try? await Task.sleep(for: .seconds(Double(intervalSeconds)))
        }
    }
}
