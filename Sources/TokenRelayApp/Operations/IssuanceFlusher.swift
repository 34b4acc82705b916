/// Writes the token issuance counts (behaviour §12 Audit) every `intervalSeconds`, and once more when
/// stopped, so what was counted before a graceful shutdown is not lost.
struct IssuanceFlusher: Service {
    let counter: IssuanceCounter
    let store: IssuanceStore
    /// Seconds between flushes (`TOKENRELAY_ISSUANCE_FLUSH_INTERVAL_S`). Default 10.
    var intervalSeconds: Int = 10

    func run() async {
        await counter.run(store: store, intervalSeconds: intervalSeconds)
        await counter.flush(to: store)
    }
}
