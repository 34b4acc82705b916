import TokenRelayAcquisition
import TokenRelayBase
import TokenRelayStore

/// Writes the token issuance counts (behaviour §12 Audit) every `intervalSeconds`, and once more when
/// stopped, so what was counted before a graceful shutdown is not lost.
package struct IssuanceFlusher: Service {
    package let counter: IssuanceCounter
    package let store: IssuanceStore
    /// Seconds between flushes (`TOKENRELAY_ISSUANCE_FLUSH_INTERVAL_S`). Default 10.
    package var intervalSeconds: Int = 10

    package init(counter: IssuanceCounter, store: IssuanceStore, intervalSeconds: Int = 10) {
        self.counter = counter
        self.store = store
        self.intervalSeconds = intervalSeconds
    }

    package func run() async {
        await counter.run(store: store, intervalSeconds: intervalSeconds)
        await counter.flush(to: store)
    }
}
