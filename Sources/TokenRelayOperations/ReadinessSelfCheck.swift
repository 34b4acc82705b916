import Foundation
import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayStore

/// Runs the readiness checks every `intervalSeconds` (`TOKENRELAY_READINESS_CHECK_INTERVAL_S`),
/// the first at start, so `tokenrelay_ready` follows the service's state whether or not anything
/// probes `/readyz` (under systemd nothing does); a probe sets it too, and the gauge shows the
/// last check whoever made it (behaviour §8.1). The checks only read.
package struct ReadinessSelfCheck: Service {
    package let health: HealthChecks
    package var intervalSeconds: Int = 10

    package init(health: HealthChecks, intervalSeconds: Int = 10) {
        self.health = health
        self.intervalSeconds = intervalSeconds
    }

    package func run() async {
        while !Task.isCancelled {
            _ = await health.readiness()
            try? await Task.sleep(for: .seconds(Double(intervalSeconds)))
        }
    }
}

/// Writes this process's encryption counts to `encryption_key_usage` every `intervalSeconds`
/// (`TOKENRELAY_ISSUANCE_FLUSH_INTERVAL_S`, as the issuance counts) and once more when stopped;
/// readiness reads them and writes nothing (behaviour §12 Encryption keys). Best effort: counts
/// that could not be written are kept for the next flush.
package struct KeyUsageFlusher: Service {
    package let store: CiphertextStore
    package var intervalSeconds: Int = 10

    package init(store: CiphertextStore, intervalSeconds: Int = 10) {
        self.store = store
        self.intervalSeconds = intervalSeconds
    }

    package func run() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(Double(intervalSeconds)))
            if Task.isCancelled { break }
            try? await store.flushUsage()
        }
        try? await store.flushUsage()
    }
}
