extension Metrics {
    /// Help lines of the replica, lock and pool series (behaviour §8 `/metrics`).
    package func describeOperations() {
        describe(
            "tokenrelay_refresh_total", "counter",
            "Refreshes by outcome (rotated, no_rotation, fenced_conflict, interaction_required, throttled, upstream_error, lease_wait_timeout, concurrency_limit)."
        )
        describe(
            "tokenrelay_refresh_claims_total", "counter", "Redemption-lease claims by result (claimed, held_elsewhere, fresh_token_stored, no_refresh_token).")
        describe("tokenrelay_refresh_lease_waits_total", "counter", "Waits for another redemption of the same refresh token to release its lease.")
        describe("tokenrelay_refresh_sts_seconds", "histogram", "Time of the STS call of one redemption (nothing of PostgreSQL held).")
    }
}
