-- Encryptions made under each key of the ring (behaviour §12 Encryption keys): past 2^31 readiness
-- warns to rotate, far below AES-GCM's bound for random 96-bit nonces. Replicas count in memory
-- and add their counts here in batches (on each readiness probe, at rotation and at shutdown),
-- so a token write never pays for it.
CREATE TABLE encryption_key_usage (
    key_id       text PRIMARY KEY,
    encryptions  bigint NOT NULL DEFAULT 0,
    updated_at   timestamptz NOT NULL DEFAULT now()
);
