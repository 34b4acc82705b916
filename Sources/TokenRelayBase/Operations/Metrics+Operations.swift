extension Metrics {
    /// Help lines of the replica, lock and pool series (behaviour §8 `/metrics`), and of the
    /// families read at scrape time (``addGauges(_:)``): a total there is a counter.
    package func describeOperations() {
        describe(
            "tokenrelay_refresh_total", "counter",
            "Refreshes by outcome (rotated, no_rotation, fenced_conflict, interaction_required, takeover_refused, throttled, upstream_error, lease_wait_timeout, concurrency_limit).",
            series: [
                "rotated", "no_rotation", "fenced_conflict", "interaction_required", "takeover_refused", "throttled", "upstream_error", "lease_wait_timeout",
                "concurrency_limit",
            ].map { ["outcome": $0] }
        )
        describe(
            "tokenrelay_refresh_claims_total", "counter",
            "Redemption-lease claims by result (claimed, taken_over, held_elsewhere, fresh_token_stored, no_refresh_token).",
            series: ["claimed", "taken_over", "held_elsewhere", "fresh_token_stored", "no_refresh_token"].map { ["result": $0] })
        describe(
            "tokenrelay_refresh_lease_renewals_total", "counter",
            "Renewals of a redemption lease while its token-endpoint call runs, by result (renewed, lost, failed).",
            series: ["renewed", "lost", "failed"].map { ["result": $0] })
        describe(
            "tokenrelay_refresh_takeover_rereads_total", "counter",
            "Takeovers that waited for the previous holder's pending rotation, by what they found (rotation_stored, unchanged, lease_lost).",
            series: ["rotation_stored", "unchanged", "lease_lost"].map { ["result": $0] })
        describe(
            "tokenrelay_refresh_lease_waits_total", "counter", "Waits for another redemption of the same refresh token to release its lease.", series: [[:]])
        describe("tokenrelay_refresh_sts_seconds", "histogram", "Time of the STS call of one redemption (nothing of PostgreSQL held).")
        describe(
            "tokenrelay_grant_token_cache_total", "counter", "App and on-behalf-of token requests by cache outcome, layer and grant.",
            series: ["app", "obo"].flatMap { grant in
                [("hit", "memory"), ("hit", "database"), ("miss", "none")].map { ["outcome": $0.0, "layer": $0.1, "grant": grant] }
            })
        describe(
            "tokenrelay_ui_required_replayed_total", "counter", "Answers replayed from the UI-required memory without a token-endpoint call.",
            series: [[:]])
        // Read at scrape time.
        describe("tokenrelay_client_credential_expiring", "gauge", "1 while the client secret or certificate expires within 14 days, else 0.")
        describe("tokenrelay_client_credential_expiry_timestamp_seconds", "gauge", "When the client secret or certificate expires, unix seconds.")
        describe("tokenrelay_db_pool_connections", "gauge", "PostgreSQL pool connections: in_use, and size (the pool's bound).")
        describe("tokenrelay_db_pool_waiting", "gauge", "Callers waiting for a PostgreSQL pool connection now.")
        describe("tokenrelay_db_pool_waits_total", "counter", "Times a caller had to wait for a PostgreSQL pool connection.")
        describe("tokenrelay_db_pool_waits", "gauge", "Deprecated: tokenrelay_db_pool_waits_total under its old name and type.")
        describe("tokenrelay_pending_rotations", "gauge", "Rotated refresh tokens held in memory until PostgreSQL stores them.")
        describe("tokenrelay_refreshes_in_flight", "gauge", "Refresh-token redemptions in flight on this replica.")
        describe("tokenrelay_refreshes_waiting", "gauge", "Requests waiting for a redemption slot or for another replica's redemption lease.")
        describe("tokenrelay_sign_in_followers", "gauge", "Requests waiting for a sign-in to finish (GET /v1/sign-ins/{sign_in_id}?wait=).")
        describe("tokenrelay_memory_cache_bytes", "gauge", "Bytes held by a memory cache (tokens, accounts).")
        describe("tokenrelay_memory_cache_entries", "gauge", "Entries held by a memory cache (tokens, accounts).")
        describe("tokenrelay_memory_cache_evictions_total", "counter", "Entries a memory cache dropped to make room (least recently used first).")
        describe("tokenrelay_memory_cache_evictions", "gauge", "Deprecated: tokenrelay_memory_cache_evictions_total under its old name and type.")
        describe("tokenrelay_tenants_suspended", "gauge", "Suspended tenants this replica refuses.")
        describe("tokenrelay_invalidation_listening", "gauge", "1 while this replica LISTENs for cross-replica invalidations, else 0.")
    }
}
