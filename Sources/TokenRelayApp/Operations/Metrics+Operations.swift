extension Metrics {
    /// Help lines of the replica, lock and pool series (SPEC §8 `/metrics`).
    func describeOperations() {
        describe("tokenrelay_refresh_lock_wait_seconds", "histogram", "Time spent taking the per-account refresh advisory lock.")
    }
}
