-- Redemption leases and refresh-token lineage (ADR 0012). A refresh claims the account's
-- refresh token for a bounded time in one short statement, redeems it with nothing of
-- PostgreSQL held, and stores the rotation fenced on `generation` in one more statement.
-- The new columns are nullable without defaults: adding them rewrites no row.
ALTER TABLE refresh_tokens
    ADD COLUMN lease_owner          text,         -- who may redeem this generation now (one id per claim)
    ADD COLUMN lease_expires_at     timestamptz,  -- after it another replica may take over
    ADD COLUMN rotated_at           timestamptz,  -- when the STS last returned a new refresh token
    ADD COLUMN replaced_fingerprint text;         -- first 16 hex digits of SHA-256 of the token this one replaced

-- The last few links of each account's chain, for `token-relay accounts show` and the tests
-- that check the chain never forks. Fingerprints only (truncated SHA-256): nothing usable.
CREATE TABLE refresh_token_lineage (
    account_id           text NOT NULL REFERENCES accounts (account_id) ON DELETE CASCADE,
    client_id            text NOT NULL,
    generation           bigint NOT NULL,
    fingerprint          text NOT NULL,
    replaced_fingerprint text,                    -- null: a sign-in or import started a chain
    cause                text NOT NULL CHECK (cause IN ('rotation', 'sign_in', 'import')),
    recorded_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, client_id, generation)
);
