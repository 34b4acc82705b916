extension Metrics {
    /// Records the last readiness answer as `tokenrelay_ready` (1 ready, 0 not), so dashboards
    /// see it without probing `/readyz` themselves (SPEC §8).
    func setReadiness(ready: Bool) {
        describe("tokenrelay_ready", "gauge", "1 when the last /readyz answer was ready (200), else 0.")
        set("tokenrelay_ready", to: ready ? 1 : 0)
    }
}

extension Metrics {
    /// Help lines of the replica, lock and pool series (SPEC §8 `/metrics`).
    func describeOperations() {
        describe("tokenrelay_refresh_lock_wait_seconds", "histogram", "Time spent taking the per-account refresh advisory lock.")
    }
}
